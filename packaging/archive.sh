#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# archive.sh OS/ARCH BINARY VERSION OUTDIR: the release archive of one
# platform, OUTDIR/macake-VERSION-OS-ARCH.tar.gz, holding the binary, the
# manual page, the completions, LICENSE, README.md, the example policies
# and the service definitions of that system (systemd units or launchd
# plists). The manual page and the completions come from bin/ (make man
# completions). Reproducible: sorted names, root's ownership, the mtime of
# SOURCE_DATE_EPOCH, gzip without a name or time.
set -eu

platform=$1 binary=$2 version=$3 out=$4
os=${platform%/*} arch=${platform#*/}
name=macake-$version-$os-$arch
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
dir=$stage/$name

for f in bin/man/macake.1 bin/completions/macake.bash bin/completions/_macake bin/completions/macake.fish; do
	[ -f "$f" ] || { echo "archive.sh: $f is missing: run 'make man completions' first" >&2; exit 1; }
done
install -d "$dir/completions" "$dir/examples/links.d"
install -m 0755 "$binary" "$dir/macake"
install -m 0644 bin/man/macake.1 "$dir/macake.1"
install -m 0644 bin/completions/macake.bash bin/completions/_macake bin/completions/macake.fish "$dir/completions/"
install -m 0644 LICENSE README.md "$dir/"
install -m 0644 examples/links.d/*.toml "$dir/examples/links.d/"
case $os in
darwin)
	install -d "$dir/examples/launchd"
	install -m 0644 examples/launchd/*.plist "$dir/examples/launchd/"
	;;
linux)
	install -d "$dir/examples/systemd" "$dir/examples/linux/links.d"
	install -m 0644 examples/systemd/*.service "$dir/examples/systemd/"
	install -m 0644 examples/linux/links.d/*.toml "$dir/examples/linux/links.d/"
	;;
esac

epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
mkdir -p "$out"
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -cf - "$name" | gzip -9n > "$out/$name.tar.gz"
echo "$out/$name.tar.gz"
