#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Prepares cakevm: the packages it runs with, Debian's stock kernel (which
# has sch_cake, ifb, act_mirred, cls_u32, sch_prio and sch_netem as
# modules) unpacked beside them, and the guest's initramfs. Idempotent:
# a second run checks and rebuilds the initramfs only (about a second).
#
#   internal/cakevm/setup.sh           # install what is missing, fetch the kernel, build
#   internal/cakevm/setup.sh --check   # say whether cakevm can run here, change nothing
#
# Everything comes from Debian's registry through apt: qemu-system-x86,
# busybox-static and kmod are installed when missing (root); the kernel is
# the package the linux-image-amd64 metapackage depends on today (its ABI
# name moves with security updates, so it is resolved, never pinned),
# fetched with `apt-get download` and unpacked with `dpkg-deb -x` into
# $CAKEVM_DIR: it is never installed into the host. $CAKEVM_DIR defaults to
# /var/tmp/macake-cakevm (about 420 MB with the kernel's modules).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
D=${CAKEVM_DIR:-/var/tmp/macake-cakevm}
PACKAGES=(qemu-system-x86 busybox-static kmod)
t0=$(date +%s.%N)

say() { echo "cakevm setup: $*"; }
die() {
	echo "cakevm setup: $*" >&2
	exit 1
}

missing_packages() {
	local p
	for p in "${PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
	done
}

# kernel_package names the image package linux-image-amd64 depends on.
kernel_package() {
	apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}

if [ "${1:-}" = --check ]; then
	# The same facts run.sh needs, without changing anything.
	command -v dpkg-query >/dev/null || {
		echo "not a Debian system (no dpkg)"
		exit 1
	}
	m=$(missing_packages | tr '\n' ' ')
	[ -z "$m" ] || {
		echo "missing packages: $m(run internal/cakevm/setup.sh as root)"
		exit 1
	}
	[ -s "$D/kver" ] && [ -f "$D/initramfs.cpio.gz" ] && [ -e "$D/vmlinuz" ] || {
		echo "no guest kernel in $D (run internal/cakevm/setup.sh)"
		exit 1
	}
	[ "$D/initramfs.cpio.gz" -nt "$HERE/init" ] || {
		echo "the initramfs in $D is older than internal/cakevm/init (run internal/cakevm/setup.sh)"
		exit 1
	}
	echo "ready: kernel $(cat "$D/kver") in $D"
	exit 0
fi

command -v apt-get >/dev/null || die "needs Debian's apt-get; this system has none"
mapfile -t need < <(missing_packages)
if [ "${#need[@]}" -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "missing packages ${need[*]}: run as root, or apt-get install ${need[*]}"
	say "apt-get install ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

kpkg=$(kernel_package)
if [ -z "$kpkg" ]; then
	[ "$(id -u)" = 0 ] && apt-get update -qq
	kpkg=$(kernel_package)
fi
[ -n "$kpkg" ] || die "apt knows no linux-image-amd64 (not Debian on amd64, or no package lists: apt-get update)"
kver=${kpkg#linux-image-}
kroot=$D/kroot-$kver
mkdir -p "$D"
if [ ! -f "$kroot/lib/modules/$kver/modules.dep" ]; then
	dl=$(mktemp -d "$D/download.XXXXXX")
	trap 'rm -rf "$dl"' EXIT
	say "apt-get download $kpkg"
	if ! (cd "$dl" && apt-get download "$kpkg" >/dev/null 2>"$dl/err"); then
		# Stale package lists name a version the mirror no longer has.
		if [ "$(id -u)" = 0 ]; then
			apt-get update -qq
			kpkg=$(kernel_package)
			kver=${kpkg#linux-image-}
			kroot=$D/kroot-$kver
			(cd "$dl" && apt-get download "$kpkg" >/dev/null 2>"$dl/err") ||
				die "apt-get download $kpkg failed: $(grep -v unsandboxed "$dl/err" | tail -n 3)"
		else
			die "apt-get download $kpkg failed: $(grep -v unsandboxed "$dl/err" | tail -n 3)"
		fi
	fi
	deb=$(ls "$dl"/*.deb)
	say "unpacking $(basename "$deb") ($(du -m "$deb" | cut -f1) MB)"
	rm -rf "$kroot.new"
	mkdir -p "$kroot.new"
	dpkg-deb -x "$deb" "$kroot.new"
	depmod -b "$kroot.new" "$kver"
	rm -rf "$kroot"
	mv "$kroot.new" "$kroot"
	rm -rf "$dl"
	trap - EXIT
	# Kernels the metapackage no longer points at.
	for old in "$D"/kroot-*; do
		[ "$old" = "$kroot" ] || rm -rf "$old"
	done
fi
ln -sfn "$kroot/boot/vmlinuz-$kver" "$D/vmlinuz"
ln -sfn "$kroot" "$D/kroot"

# The initramfs: busybox, init, and the modules that reach the host's root.
I=$D/initramfs.d
rm -rf "$I"
mkdir -p "$I/bin" "$I/lib/modules/$kver"
cp /bin/busybox "$I/bin/busybox"
install -m 0755 "$HERE/init" "$I/init"
: >"$I/modules.load"
for m in virtio_pci 9pnet_virtio 9p overlay; do
	modprobe -d "$kroot" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
done | awk '!seen[$0]++' | while read -r ko; do
	rel=${ko#"$kroot/lib/modules/$kver/"}
	mkdir -p "$I/lib/modules/$kver/$(dirname "$rel")"
	cp "$ko" "$I/lib/modules/$kver/$rel"
	echo "$rel" >>"$I/modules.load"
done
# No cpio on a minimal Debian: busybox has one.
(cd "$I" && find . | LC_ALL=C sort | busybox cpio -o -H newc -R 0:0 2>/dev/null | gzip -6) >"$D/initramfs.cpio.gz.new"
mv "$D/initramfs.cpio.gz.new" "$D/initramfs.cpio.gz"
rm -rf "$I"
echo "$kver" >"$D/kver"
say "ready: kernel $kver, initramfs $(stat -c %s "$D/initramfs.cpio.gz") bytes, $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
