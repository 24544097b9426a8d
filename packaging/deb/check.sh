#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# check.sh DEB: what `make deb-check` (and CI) proves of macake's .deb on
# this machine, as root:
#
#   1. dpkg -i installs it; macake version runs; every file is in place;
#      the unit is there and `systemd-analyze verify` accepts it; where
#      systemd is PID 1 (GitHub's runners), systemctl starts the unit,
#      whose watch answers status, and stops it;
#   2. `macake watch` runs as the unit's ExecStart says, in a network
#      namespace of its own with a policy for its one link, until it
#      shapes the link, and a few seconds more; it leaves the shaping in
#      place when it stops, as under systemd;
#   3. dpkg -r (in that namespace) runs the prerm, which takes the shaping
#      away (macake down); where systemd is not PID 1 it says it skips
#      the systemctl steps;
#   4. dpkg --purge removes the rest, the state directory included, and
#      nothing of the package is left.
#
# It refuses to run where a macake package is installed already.
set -eu

deb=$1
if [ "$(id -u)" != 0 ]; then
	echo "deb-check: SKIPPED: installing a package needs root (sudo make deb-check)"
	exit 0
fi
for tool in dpkg dpkg-query ip tc; do
	command -v "$tool" >/dev/null 2>&1 || { echo "deb-check: SKIPPED: no $tool here"; exit 0; }
done
if dpkg-query -W -f='${Status}' macake 2>/dev/null | grep -q 'ok installed'; then
	echo "deb-check: a macake package is installed on this machine already; not touching it" >&2
	exit 1
fi

ns=macake-debcheck-$$
policy=/etc/macake/links.d/debcheck.toml
work=$(mktemp -d)
watch_pid=
installed=
step() { echo ">> deb-check: $*"; }
fail() {
	echo "deb-check: FAIL: $*" >&2
	exit 1
}
cleanup() {
	if [ -n "$watch_pid" ]; then kill "$watch_pid" 2>/dev/null || true; wait "$watch_pid" 2>/dev/null || true; fi
	rm -f "$policy"
	if [ -n "$installed" ] && dpkg-query -W macake >/dev/null 2>&1; then
		ip netns exec "$ns" dpkg --purge macake >/dev/null 2>&1 || dpkg --purge --force-all macake >/dev/null 2>&1 || true
	fi
	ip netns del "$ns" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

step "dpkg -i $deb"
dpkg -i "$deb" > "$work/install.log" 2>&1 || { cat "$work/install.log"; fail "dpkg -i"; }
installed=1
cat "$work/install.log"
grep -q "sudo systemctl enable --now macake-watch" "$work/install.log" || fail "postinst did not say how to start the daemon"
if [ ! -d /run/systemd/system ]; then
	grep -q "systemd is not running here" "$work/install.log" || fail "postinst did not say it skipped systemctl"
fi

step "macake version"
/usr/bin/macake version || fail "macake version"

step "files in place"
unit=/lib/systemd/system/macake-watch.service
for f in /usr/bin/macake /usr/share/man/man1/macake.1.gz /usr/share/bash-completion/completions/macake \
	/usr/share/zsh/vendor-completions/_macake /usr/share/fish/vendor_completions.d/macake.fish \
	"$unit" /usr/lib/systemd/user/macake-monitor.service /usr/share/doc/macake/copyright \
	/usr/share/doc/macake/README.md /usr/share/doc/macake/examples/links.d/home-cable.toml /etc/macake/links.d; do
	[ -e "$f" ] || fail "$f is missing"
	dpkg -S "$f" >/dev/null 2>&1 || fail "$f is not the package's"
done
execstart=$(sed -n 's/^ExecStart=//p' "$unit")
[ "$execstart" = "/usr/bin/macake --config-dir /etc/macake/links.d --state-dir /var/lib/macake watch" ] ||
	fail "the unit's ExecStart is $execstart"
/usr/bin/macake validate --config-dir /usr/share/doc/macake/examples/links.d --target linux >/dev/null ||
	fail "the example policies do not validate"
if command -v man >/dev/null 2>&1; then
	[ "$(man -l /usr/share/man/man1/macake.1.gz 2>/dev/null | wc -l)" -gt 50 ] || fail "man -l cannot render the manual page"
else
	echo "   (man is not installed: the manual page was not rendered)"
fi

step "systemd-analyze verify $unit"
if command -v systemd-analyze >/dev/null 2>&1; then
	if systemd-analyze verify "$unit" > "$work/verify.log" 2>&1; then
		echo "   the unit verifies"
	elif grep -q 'macake-watch.service' "$work/verify.log"; then
		cat "$work/verify.log"
		fail "systemd-analyze verify found a problem with the unit"
	else
		cat "$work/verify.log"
		echo "   systemd-analyze verify does not work here (systemd is not PID 1); the unit was not verified"
	fi
else
	echo "   no systemd-analyze here; the unit was not verified"
fi

if [ -d /run/systemd/system ]; then
	# No policy yet, so the machine's own interfaces stay unshaped.
	step "systemctl start macake-watch (systemd is PID 1 here)"
	systemctl start macake-watch.service
	i=0
	until /usr/bin/macake status --json 2>/dev/null | grep -q '"running": true'; do
		i=$((i + 1))
		if [ "$i" -gt 200 ]; then
			systemctl status macake-watch.service || true
			journalctl -u macake-watch.service -n 50 --no-pager || true
			fail "the unit's watch does not answer status within 20 s"
		fi
		sleep 0.1
	done
	systemctl is-active macake-watch.service
	systemctl stop macake-watch.service
	echo "   the unit ran watch, which answered status, and stopped"
else
	echo "   systemd is not PID 1 here: the unit is not started; watch runs as its ExecStart says instead"
fi

step "macake watch, as ExecStart runs it, in network namespace $ns"
ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" link add mc0 type veth peer name mc1
ip -n "$ns" link set mc1 up
ip -n "$ns" link set mc0 up
ip -n "$ns" addr add 192.0.2.2/24 dev mc0
ip -n "$ns" route add default via 192.0.2.1 dev mc0
cat > "$policy" <<'POLICY'
# deb-check's link: upload shaped at a fixed rate (no IFB needed).
[match]
interface = "mc0"
[shaper]
mode = "fixed"
upload = "5mbit"
download = "20mbit"
download_mode = "off"
POLICY
chmod 0644 "$policy"
install -d -m 0711 /var/lib/macake # StateDirectory= would
# shellcheck disable=SC2086 # ExecStart's words, as systemd splits them (no quotes in it)
ip netns exec "$ns" $execstart > "$work/watch.log" 2>&1 &
watch_pid=$!
shaped() { tc -n "$ns" qdisc show dev mc0 | grep -q -e 'qdisc htb' -e 'qdisc cake' -e 'qdisc prio'; }
i=0
until shaped; do
	i=$((i + 1))
	if [ "$i" -gt 200 ] || ! kill -0 "$watch_pid" 2>/dev/null; then
		cat "$work/watch.log"
		fail "watch did not shape mc0 within 20 s"
	fi
	sleep 0.1
done
sleep 3
kill -0 "$watch_pid" 2>/dev/null || { cat "$work/watch.log"; fail "watch exited"; }
tc -n "$ns" qdisc show dev mc0
kill -TERM "$watch_pid"
code=0
wait "$watch_pid" || code=$?
watch_pid=
[ "$code" = 0 ] || { cat "$work/watch.log"; fail "watch exited $code on SIGTERM"; }
grep -q 'reconciled' "$work/watch.log" || { cat "$work/watch.log"; fail "watch logged no reconcile"; }
shaped || fail "watch took the shaping away when it stopped (under systemd it leaves it for the next start)"
echo "   watch shaped mc0 and stopped cleanly, leaving the shaping in place"

step "dpkg -r: prerm takes the shaping away"
rm -f "$policy"
ip netns exec "$ns" dpkg -r macake > "$work/remove.log" 2>&1 || { cat "$work/remove.log"; fail "dpkg -r"; }
cat "$work/remove.log"
if shaped; then
	tc -n "$ns" qdisc show dev mc0
	fail "the shaping was left behind by the removal"
fi
if [ ! -d /run/systemd/system ]; then
	grep -q "skipping systemctl stop and disable" "$work/remove.log" || fail "prerm did not say it skipped systemctl"
fi
[ -e /usr/bin/macake ] && fail "/usr/bin/macake is still there after dpkg -r"
if [ -d /run/systemd/system ] && systemctl is-enabled --quiet macake-watch.service 2>/dev/null; then
	fail "macake-watch is still enabled after dpkg -r"
fi
[ -d /var/lib/macake ] || fail "dpkg -r removed the state directory (only purge may)"

step "dpkg --purge: nothing left"
dpkg --purge macake > "$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "dpkg --purge"; }
installed=
cat "$work/purge.log"
if dpkg-query -W -f='${Status}' macake 2>/dev/null | grep -q 'installed'; then
	fail "dpkg still lists macake: $(dpkg-query -W -f='${Status}' macake)"
fi
for f in /usr/bin/macake /usr/share/man/man1/macake.1.gz /usr/share/bash-completion/completions/macake \
	/usr/share/zsh/vendor-completions/_macake /usr/share/fish/vendor_completions.d/macake.fish \
	"$unit" /usr/lib/systemd/user/macake-monitor.service /usr/share/doc/macake /var/lib/macake /etc/macake; do
	[ -e "$f" ] && fail "$f is left after the purge"
done
echo "deb-check: ok: installed, verified, ran watch to its first shaping, removed without leaving shaping, purged without leaving a file"
