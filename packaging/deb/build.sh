#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# build.sh BINARY GOARCH VERSION OUTDIR: macake's .deb for one Linux
# architecture, built with dpkg-deb alone (no debhelper):
#
#   /usr/bin/macake                              the binary
#   /usr/share/man/man1/macake.1.gz              the manual page
#   /usr/share/bash-completion/completions/macake, /usr/share/zsh/vendor-completions/_macake,
#   /usr/share/fish/vendor_completions.d/macake.fish
#   /lib/systemd/system/macake-watch.service     the unit `macake install-daemon --systemd-unit`
#                                                renders for /usr/bin/macake (one source of the unit)
#   /usr/lib/systemd/user/macake-monitor.service the user unit of `macake monitor`, likewise
#   /usr/share/doc/macake/                       copyright, README.md, examples/ (policies)
#   /etc/macake/links.d/                         empty: the policies are the user's
#
# and the maintainer scripts beside this file. The manual page, the
# completions and the units are rendered by the build machine's macake
# (MACAKE_HOST_BIN, default bin/macake), whatever BINARY's architecture.
# It prints the path of the .deb.
set -eu

binary=$1 goarch=$2 version=$3 out=$4
here=$(dirname "$0")
host=${MACAKE_HOST_BIN:-bin/macake}

case $goarch in
amd64 | arm64) arch=$goarch ;;
arm) arch=armhf ;;
mipsle) arch=mipsel ;;
386) arch=i386 ;;
*) echo "build.sh: no Debian architecture for GOARCH=$goarch" >&2; exit 64 ;;
esac

epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH="$epoch"

# The Debian version: v1.2.3 is 1.2.3, v1.2.3-4-gabc 1.2.3+4.gabc; a tree
# without a tag is 0~gitDATE.COMMIT, which sorts before any release.
v=${version#v}
case $v in
[0-9]*) debversion=$(printf '%s' "$v" | sed -e 's/-\([0-9][0-9]*\)-g/+\1.g/' -e 's/-dirty$/+dirty/' -e 's/-/./g') ;;
*) debversion=0~git$(date -u -d "@$epoch" +%Y%m%d).$(printf '%s' "$v" | sed -e 's/[^A-Za-z0-9.+~]/./g') ;;
esac

root=$(mktemp -d)
err=$(mktemp)
trap 'rm -rf "$root" "$err"' EXIT

# render ARGS... > FILE: the host macake's output, its warnings (about a
# /usr/bin/macake that is not installed here) shown only on failure.
render() {
	if ! "$host" "$@" 2>"$err"; then
		cat "$err" >&2
		echo "build.sh: '$host $*' failed" >&2
		exit 1
	fi
}

install -d "$root/usr/bin" "$root/usr/share/man/man1" "$root/usr/share/bash-completion/completions" \
	"$root/usr/share/zsh/vendor-completions" "$root/usr/share/fish/vendor_completions.d" \
	"$root/lib/systemd/system" "$root/usr/lib/systemd/user" "$root/usr/share/doc/macake/examples/links.d" \
	"$root/etc/macake/links.d" "$root/DEBIAN"
install -m 0755 "$binary" "$root/usr/bin/macake"
render man | gzip -9n > "$root/usr/share/man/man1/macake.1.gz"
render completion bash > "$root/usr/share/bash-completion/completions/macake"
render completion zsh > "$root/usr/share/zsh/vendor-completions/_macake"
render completion fish > "$root/usr/share/fish/vendor_completions.d/macake.fish"

# The units, with a header that says where they came from instead of the
# renderer's steps to install them by hand.
unit() {
	printf '# %s, installed by the macake package (rendered by: macake %s --systemd-unit --binary /usr/bin/macake).\n' "$1" "$2"
	printf '# %s\n' "$3"
	render --config-dir /etc/macake/links.d --state-dir /var/lib/macake "$2" --systemd-unit --binary /usr/bin/macake | sed '/^\[Unit\]/,$!d'
}
unit macake-watch.service install-daemon "Start it: sudo systemctl enable --now macake-watch; logs: journalctl -u macake-watch" \
	> "$root/lib/systemd/system/macake-watch.service"
unit macake-monitor.service install-agent "A user unit: systemctl --user enable --now macake-monitor" \
	> "$root/usr/lib/systemd/user/macake-monitor.service"

doc=$root/usr/share/doc/macake
{
	echo "macake: latency-driven adaptive bandwidth shaping"
	echo "Source: https://github.com/macake/macake"
	echo
	echo "License: Apache-2.0"
	echo
	cat LICENSE
} > "$doc/copyright"
install -m 0644 README.md "$doc/README.md"
install -m 0644 examples/links.d/*.toml examples/linux/links.d/*.toml "$doc/examples/links.d/"
for f in postinst prerm postrm; do
	install -m 0755 "$here/$f" "$root/DEBIAN/$f"
done
find "$root" -type d -exec chmod 0755 {} +
find "$root/usr/share" "$root/lib" "$root/usr/lib" -type f -exec chmod 0644 {} +

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: macake
Version: $debversion
Architecture: $arch
Maintainer: macake developers <macake@users.noreply.github.com>
Installed-Size: $size
Depends: iproute2
Recommends: kmod
Section: net
Priority: optional
Homepage: https://github.com/macake/macake
Description: latency-driven adaptive bandwidth shaping (cake-autorate's idea)
 macake shapes a link slightly below what it carries, so that the queue
 forms on this machine and stays short, and steers that rate in real time
 from the delay it measures, as the link's capacity moves (Starlink, LTE,
 hotel Wi-Fi). Each link is one TOML policy file in /etc/macake/links.d;
 'macake watch' (the macake-watch unit) keeps the system matching them.
 On Linux it shapes with tc: CAKE where the kernel has sch_cake, else
 htb and bfifo.
CONTROL

mkdir -p "$out"
deb=$out/macake_${debversion}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
