#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Runs one command in a fresh, throw-away QEMU guest that boots Debian's
# stock kernel (real sch_cake, ifb, act_mirred, ...) with the host's / as
# its root, read-only under a tmpfs overlay: host binaries (tc, ip, a Go
# test binary) run unchanged at their own paths, as root, in the same
# directory. Their stdout and stderr come back as ours and their exit
# status becomes ours, so it works as `go test -exec`:
#
#   internal/cakevm/setup.sh                                  # once (root): packages, kernel
#   internal/cakevm/run.sh -- tc qdisc add dev lo root cake bandwidth 10mbit
#   go test -exec "$PWD/internal/cakevm/run.sh --" ./backend/tc
#
# Options (before --):
#   --timeout S     kill the guest after S seconds of wall time (default 1800)
#   --accel A       auto (default), kvm or tcg. auto takes KVM only where
#                   kvm_intel or kvm_amd is loaded: a /dev/kvm backed by
#                   anything else (kvm_pvm on our build machines) cannot
#                   boot a stock kernel; else TCG, software emulation.
#   -m MB, --smp N  guest memory (1024) and CPUs (2)
#   --xchg DIR      the guest's /xchg (kept); else a temporary folder
#   -e NAME[=VAL]   pass an environment variable (PATH, HOME, LANG, LC_ALL,
#                   TZ, GO*, MACAKE_* and CAKEVM_* pass anyway)
#   -v              the guest's console on our stderr as it boots
#
# Exit status: the command's; 124 when the guest timed out and 125 when it
# ended without one (it did not boot), each with the tail of its console on
# stderr; 2 when cakevm is not set up.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
D=${CAKEVM_DIR:-/var/tmp/macake-cakevm}
accel=auto mem=1024 smp=2 tmo=1800 xchg="" verbose=0 extra_append="" envs=()
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout) tmo=$2; shift 2 ;;
	--accel) accel=$2; shift 2 ;;
	-m) mem=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--xchg) xchg=$2; shift 2 ;;
	--append) extra_append=$2; shift 2 ;; # kernel command line (the harness's own tests)
	-e) envs+=("$2"); shift 2 ;;
	-v) verbose=1; shift ;;
	-h | --help) sed -n '4,30p' "$0"; exit 0 ;;
	--) shift; break ;;
	-*) echo "cakevm: unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "cakevm: no command (see --help)" >&2; exit 2; }
if ! why=$("$HERE/setup.sh" --check); then
	echo "cakevm: not set up: $why" >&2
	exit 2
fi

case "$accel" in
auto)
	accel=tcg
	if [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then accel=kvm; fi
	;;
kvm | tcg) ;;
*) echo "cakevm: --accel $accel: want auto, kvm or tcg" >&2; exit 2 ;;
esac
if [ "$accel" = kvm ]; then
	accel_args=(-accel kvm -cpu host)
else
	accel_args=(-accel tcg,thread=multi,tb-size=256 -cpu max) # a host thread per vCPU
fi

run=$(mktemp -d "${TMPDIR:-/tmp}/cakevm-run.XXXXXX")
keep=0
if [ -z "$xchg" ]; then xchg=$run/xchg; else keep=1; fi
mkdir -p "$xchg"
xchg=$(cd "$xchg" && pwd)
rm -f "$xchg/rc" "$xchg/console.log"
cleanup() { rm -rf "$run"; }
trap cleanup EXIT

# The command file: an allow-listed environment, the directory, the command
# (quoted by bash's %q, so the guest runs it with bash).
{
	echo 'export PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8'
	while IFS='=' read -r name _; do
		case "$name" in PATH | HOME | LANG | LC_ALL | TZ | GO* | MACAKE_* | CAKEVM_*) printf 'export %s=%q\n' "$name" "${!name}" ;; esac
	done < <(env | grep -E '^[A-Za-z_][A-Za-z0-9_]*=')
	for e in ${envs[@]+"${envs[@]}"}; do
		case "$e" in
		*=*) printf 'export %s=%q\n' "${e%%=*}" "${e#*=}" ;;
		*) [ -z "${!e+x}" ] || printf 'export %s=%q\n' "$e" "${!e}" ;;
		esac
	done
	printf 'cd %q || exit 125\n' "$PWD"
	printf 'exec'
	printf ' %q' "$@"
	printf '\n'
} >"$xchg/cmd"

# TSC as the clock (TCG has no kvm-clock, and HPET reads are slow there);
# mitigations off (page-table isolation flushes the TLB at every syscall).
append="console=ttyS0 panic=-1 mitigations=off tsc=reliable clocksource=tsc cakevm_kroot=$(readlink -f "$D/kroot")"
[ "$verbose" = 1 ] || append="$append quiet loglevel=1"
[ -z "$extra_append" ] || append="$append $extra_append"

# ttyS0: the console, to console.log; ttyS1: the command's stdout, to ours;
# ttyS2: its stderr, through a FIFO drained by cat, so that QEMU never
# opens our stderr itself (it may be a socket, or a file it would truncate).
mkfifo "$run/stderr"
cat "$run/stderr" >&2 &
catpid=$!
console=$xchg/console.log
t0=$(date +%s.%N)
# timeout(1), not a sleeping watchdog: a background sleep would keep our
# output pipes open and hang the caller. -k: SIGKILL 10 s after SIGTERM.
timeout -k 10 "$tmo" qemu-system-x86_64 "${accel_args[@]}" -m "$mem" -smp "$smp" \
	-nodefaults -no-user-config -display none -no-reboot -nic none \
	-kernel "$D/vmlinuz" -initrd "$D/initramfs.cpio.gz" -append "$append" \
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
	-virtfs "local,path=$xchg,mount_tag=xchg,security_model=none" \
	-chardev "file,id=con,path=$console" -serial chardev:con \
	-serial stdio \
	-chardev "file,id=err,path=$run/stderr" -serial chardev:err \
	</dev/null &
qpid=$!
[ "$verbose" = 0 ] || { tail -F "$console" 2>/dev/null >&2 & tailpid=$!; }
trap 'kill "$qpid" 2>/dev/null' INT TERM HUP
wait "$qpid"
qrc=$?
trap - INT TERM HUP
[ -z "${tailpid:-}" ] || kill "$tailpid" 2>/dev/null
exec 3<>"$run/stderr"
exec 3>&- # lets cat end if QEMU never opened the FIFO
wait "$catpid" 2>/dev/null
wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')

rc=$(cat "$xchg/rc" 2>/dev/null || true)
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	echo "cakevm: the guest did not finish within $tmo s and was killed; its console ends:" >&2
	tail -n 40 "$console" >&2 2>/dev/null
	rc=124
elif [ -z "$rc" ] || [ "$rc" = 125 ]; then
	# 125 is also what init writes when it cannot prepare the root.
	echo "cakevm: the guest ended without the command's exit status (QEMU exit $qrc): it did not boot, or its init failed; its console ends:" >&2
	tail -n 40 "$console" >&2 2>/dev/null
	rc=125
fi
[ "${CAKEVM_QUIET:-0}" = 1 ] ||
	echo "cakevm: $(cat "$D/kver"), accel=$accel smp=$smp mem=${mem}M, ${wall} s wall, exit status $rc" >&2
[ "$keep" = 1 ] || rm -rf "$xchg"
exit "$rc"
