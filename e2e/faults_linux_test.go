// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/internal/netns"
)

// faultLab is a client namespace whose wan0 is a veth to a peer, with
// macake ready to run in it on the tc backend.
func faultLab(t *testing.T) (*netns.Namespace, *Macake) {
	t.Helper()
	lab := netns.New(t, "e2ef")
	lab.Require("tc", "iproute2")
	cli, peer := lab.Namespace("cli"), lab.Namespace("peer")
	lab.Link(cli, ClientDev, peer, "lan0")
	cli.AddAddr(ClientDev, clientAddr+"/24")
	peer.AddAddr("lan0", ispLAN+"/24")
	return cli, NewMacake(t, macake(t), cli, ClientDev, ispLAN)
}

// fixedWAN is a small fixed-rate policy on wan0, with DOCSIS overhead:
// the kernel must get the policy's rates unchanged, with overhead 18 and
// mpu 64 on the class (counted once, by htb).
var fixedWAN = configtest.Policy{Interface: "wan0", Mode: "fixed", Download: "40mbit", Upload: "8mbit", More: `queue = "64KB"
overhead = 18
mpu = 64
[autorate]
reflectors = ["10.77.2.11", "10.77.2.12", "10.77.2.13", "10.77.2.14", "10.77.2.15", "10.77.2.16"]
`}.TOML()

func mustContain(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

// TestRouterExampleOnThisKernel applies the shipped Linux router example
// (examples/linux/links.d/router.toml, on wan0): with sch_cake it gets
// CAKE with every [cake] option; without, the dry run and the apply warn
// that the CAKE-only options cannot be applied, name each of them, and
// shape with htb + bfifo that still counts the overhead and mpu. Nothing
// is dropped silently either way.
func TestRouterExampleOnThisKernel(t *testing.T) {
	cli, m := faultLab(t)
	example, err := os.ReadFile("../examples/linux/links.d/router.toml")
	if err != nil {
		t.Fatal(err)
	}
	policy := strings.Replace(string(example), `interface = "eth0"`, `interface = "wan0"`, 1)
	if policy == string(example) {
		t.Fatal(`the router example no longer says interface = "eth0"`)
	}
	m.SetPolicy(t, "router", policy)

	dry := m.MustRun(t, 0, "apply", "--dry-run")
	out := dry.Stdout + dry.Stderr
	if strings.Contains(out, "has no sch_cake") {
		mustContain(t, "dry run on a kernel without CAKE", out,
			"diffserv4, dual-srchost isolation on upload, dual-dsthost isolation on download, nat and ack-filter cannot be applied",
			"shaping with htb+bfifo instead", "+ overhead    18", "+ mpu         64")
		applied := m.MustRun(t, 0, "apply")
		mustContain(t, "apply on a kernel without CAKE", applied.Stdout+applied.Stderr, "has no sch_cake")
		class := cli.Exec("tc", "-d", "class", "show", "dev", ClientDev)
		mustContain(t, "the upload class", class, "rate 20Mbit", "overhead 18", "mpu 64")
		mustContain(t, "the download class", cli.Exec("tc", "-d", "class", "show", "dev", tc.IFBName(0)), "rate 400Mbit", "overhead 18")
	} else {
		mustContain(t, "dry run on a kernel with CAKE", out, "cake")
		m.MustRun(t, 0, "apply")
		mustContain(t, "the upload qdisc", cli.Exec("tc", "qdisc", "show", "dev", ClientDev), "cake", "dual-srchost", "nat", "ack-filter", "diffserv4", "overhead 18")
		mustContain(t, "the download qdisc", cli.Exec("tc", "qdisc", "show", "dev", tc.IFBName(0)), "cake", "dual-dsthost", "nat", "ingress")
	}
	again := m.MustRun(t, 0, "apply")
	mustContain(t, "a second apply", again.Stdout, "No changes.")
	// doctor plans as apply does, overhead counted by the kernel included:
	// right after an apply it must see no drift.
	doc, err := m.Run(t.Context(), 30*time.Second, "doctor")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(doc.Stdout, "differs") {
		t.Errorf("doctor sees drift right after an apply:\n%s", doc.Stdout)
	}
	m.MustRun(t, 0, "down")
	if q := cli.Exec("tc", "qdisc", "show", "dev", ClientDev); strings.Contains(q, "4d4b:") {
		t.Errorf("down left macake's root:\n%s", q)
	}
	if links := cli.Exec("ip", "link", "show"); strings.Contains(links, tc.IFBPrefix) {
		t.Errorf("down left an IFB:\n%s", links)
	}
}

// TestDryRunNeverWritesTheStateFile: a dry run holds no lock, so it must
// not write the state file, not even to record a root qdisc of macake's it
// learns about while looking (a state file from before that record, or a
// corrupt one, which a person should still find as it was).
func TestDryRunNeverWritesTheStateFile(t *testing.T) {
	_, m := faultLab(t)
	m.SetPolicy(t, "wan", fixedWAN)
	m.MustRun(t, 0, "apply")
	path := filepath.Join(m.StateDir, "state.json")
	for _, old := range []string{`{"version":1,"slots":{"wan":0}}`, `{"version":1,"slots":{"wan":0},"profiles":{"wan`} {
		if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		m.MustRun(t, 0, "plan")
		m.MustRun(t, 0, "down", "--dry-run")
		if b, err := os.ReadFile(path); err != nil || string(b) != old {
			t.Errorf("a dry run changed the state file from %s to %s (%v)", old, b, err)
		}
	}
	m.MustRun(t, 0, "down")
}

// TestApplyRepairsDriftAndLeavesForeignQdiscs: a rate changed by hand, a
// deleted IFB and a root qdisc someone put in place of macake's are put
// back by the next apply. A root qdisc another tool put there before
// macake ever shaped the interface is reported (plan does not claim the
// live state matches), never replaced, and survives down.
func TestApplyRepairsDriftAndLeavesForeignQdiscs(t *testing.T) {
	cli, m := faultLab(t)
	m.SetPolicy(t, "wan", fixedWAN)
	m.MustRun(t, 0, "apply")

	cli.Exec("tc", "class", "change", "dev", ClientDev, "parent", "4d4b:", "classid", "4d4b:1", "htb", "rate", "1mbit", "ceil", "1mbit")
	cli.Exec("ip", "link", "del", "dev", tc.IFBName(0))
	repaired := m.MustRun(t, 0, "apply")
	mustContain(t, "the repairing apply", repaired.Stdout, "~ shaper on wan0", "1 Mbit/s -> 8 Mbit/s", "+ ifb ifb-macake0", "Applied:")
	mustContain(t, "the upload class after repair", cli.Exec("tc", "-d", "class", "show", "dev", ClientDev), "rate 8Mbit overhead 18", "mpu 64")
	mustContain(t, "the redirect after repair", cli.Exec("tc", "filter", "show", "dev", ClientDev, "ingress"), "ifb-macake0")
	mustContain(t, "a third apply", m.MustRun(t, 0, "apply").Stdout, "No changes.")

	cli.Exec("tc", "qdisc", "replace", "dev", ClientDev, "root", "handle", "1:", "pfifo", "limit", "100")
	restored := m.MustRun(t, 0, "apply")
	mustContain(t, "apply over macake's replaced root", restored.Stdout,
		"~ shaper on wan0", "root qdisc on wan0 replaced by someone else (pfifo 1:); restoring macake's shaper", "Applied:")
	if q := cli.Exec("tc", "qdisc", "show", "dev", ClientDev); strings.Contains(q, "pfifo 1:") || !strings.Contains(q, "htb 4d4b: root") {
		t.Errorf("wan0's root after the repair:\n%s", q)
	}
	mustContain(t, "the upload class after the root was restored", cli.Exec("tc", "-d", "class", "show", "dev", ClientDev), "rate 8Mbit overhead 18")
	mustContain(t, "an apply after the restore", m.MustRun(t, 0, "apply").Stdout, "No changes.")

	// Another tool's root, there before macake shaped wan0: left alone.
	m.MustRun(t, 0, "down")
	cli.Exec("tc", "qdisc", "replace", "dev", ClientDev, "root", "handle", "1:", "pfifo", "limit", "100")
	foreign := m.MustRun(t, 0, "apply")
	mustContain(t, "apply over a foreign root", foreign.Stdout+foreign.Stderr,
		"wan0 has a root qdisc macake does not own (pfifo 1:), so upload is not shaped", "tc qdisc del dev wan0 root")
	planned := m.MustRun(t, 0, "plan")
	mustContain(t, "plan over a foreign root", planned.Stdout, `No changes macake can make, but the live shaping does not match the policy: link "wan" upload not shaped`)
	if strings.Contains(planned.Stdout, "matches") {
		t.Errorf("plan claims the live state matches while upload is not shaped:\n%s", planned.Stdout)
	}
	mustContain(t, "the foreign root after apply", cli.Exec("tc", "qdisc", "show", "dev", ClientDev), "pfifo 1: root")
	m.MustRun(t, 0, "down")
	mustContain(t, "the foreign root after down", cli.Exec("tc", "qdisc", "show", "dev", ClientDev), "pfifo 1: root")
}

// wrapper writes an executable shell script that stands in for a tool.
func wrapper(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// refusingTC writes a tc that refuses, as the kernel would, the commands
// whose words match pattern (an extended regexp) while refuse (a shell
// condition, with its side effects) holds: a command alone exits 2 with
// the kernel's message; in a `tc -batch -` the lines before it run and tc
// names the refused line ("Command failed -:N"), as tc -batch does.
func refusingTC(t *testing.T, pattern, refuse string) string {
	t.Helper()
	return wrapper(t, "tc", `real='`+tc.DefaultTools().TC+`'
msg='RTNETLINK answers: No buffer space available'
case " $* " in
*" -batch - "*)
	in=$(mktemp) || exit 1
	cat > "$in"
	n=$(grep -n -m1 -E '`+pattern+`' "$in" | cut -d: -f1)
	if [ -n "$n" ] && `+refuse+`; then
		if [ "$n" -gt 1 ]; then
			head -n $((n - 1)) "$in" | "$real" "$@" || { rc=$?; rm -f "$in"; exit $rc; }
		fi
		rm -f "$in"
		echo "$msg" >&2
		echo "Command failed -:$n" >&2
		exit 1
	fi
	"$real" "$@" < "$in"
	rc=$?
	rm -f "$in"
	exit $rc;;
esac
if printf '%s\n' "$*" | grep -qE '`+pattern+`' && `+refuse+`; then
	echo "$msg" >&2
	exit 2
fi
exec "$real" "$@"
`)
}

// TestApplyConvergesAfterTCFails: tc fails in the middle of an apply (the
// kernel refuses the upload class once); apply stops there, exits 1 and
// says so, and the next apply continues from the live state to the same
// end state as an undisturbed one.
func TestApplyConvergesAfterTCFails(t *testing.T) {
	cli, m := faultLab(t)
	m.SetPolicy(t, "wan", fixedWAN)
	flag := filepath.Join(t.TempDir(), "fail-once")
	os.WriteFile(flag, nil, 0o644)
	fakeTC := refusingTC(t, `(^| )class replace dev wan0( |$)`, `[ -e '`+flag+`' ] && rm -f '`+flag+`'`)
	m.Env = append(m.Env, "MACAKE_TC="+fakeTC)
	failed := m.MustRun(t, 1, "apply")
	mustContain(t, "the failed apply", failed.Stdout+failed.Stderr, "then stopped", "No buffer space available", "--state-dir", " apply' again: it continues from the live state")
	if _, err := os.Stat(flag); err == nil {
		t.Fatal("the injected failure never happened")
	}
	m.MustRun(t, 0, "apply")
	mustContain(t, "the upload class", cli.Exec("tc", "class", "show", "dev", ClientDev), "rate 8Mbit")
	mustContain(t, "the download class", cli.Exec("tc", "class", "show", "dev", tc.IFBName(0)), "rate 40Mbit")
	mustContain(t, "the apply after converging", m.MustRun(t, 0, "apply").Stdout, "No changes.")
}

// TestApplyWithoutIFB: a kernel without the ifb module (ip refuses the
// device type, in the capability probe too) shapes upload only and every
// plan says that download is not shaped.
func TestApplyWithoutIFB(t *testing.T) {
	cli, m := faultLab(t)
	m.SetPolicy(t, "wan", fixedWAN)
	fakeIP := wrapper(t, "ip", `case " $* " in
*" type ifb "*) echo "Error: Unknown device type." >&2; exit 2;;
esac
exec '`+tc.DefaultTools().IP+`' "$@"
`)
	m.Env = append(m.Env, "MACAKE_IP="+fakeIP)
	applied := m.MustRun(t, 0, "apply")
	mustContain(t, "apply without ifb", applied.Stdout+applied.Stderr, "download is not shaped: the kernel lacks ifb")
	mustContain(t, "the upload class", cli.Exec("tc", "class", "show", "dev", ClientDev), "rate 8Mbit")
	if links := cli.Exec("ip", "link", "show"); strings.Contains(links, tc.IFBPrefix) {
		t.Errorf("an IFB was created:\n%s", links)
	}
	// Nothing is left to do, and the plan does not call that a match.
	mustContain(t, "the plan after apply", m.MustRun(t, 0, "apply", "--dry-run").Stdout,
		`No changes macake can make, but the live shaping does not match the policy: link "wan" download not shaped`)
}

// TestApplyInterfaceRenamed: the link's interface is renamed under macake
// (while the link facts still say it is up): apply warns that it is not
// found, removes what it had built on the renamed device and the IFB, and
// shapes it again once the name is back.
func TestApplyInterfaceRenamed(t *testing.T) {
	cli, m := faultLab(t)
	m.SetPolicy(t, "wan", fixedWAN)
	m.MustRun(t, 0, "apply")
	cli.Exec("ip", "link", "set", "dev", ClientDev, "down")
	cli.Exec("ip", "link", "set", "dev", ClientDev, "name", "wan1")
	renamed := m.MustRun(t, 0, "apply")
	mustContain(t, "apply after the rename", renamed.Stdout+renamed.Stderr,
		"interface wan0 not found; the link is shaped once it appears", "- shaper on wan1", "- ifb ifb-macake0")
	if q := cli.Exec("tc", "qdisc", "show", "dev", "wan1"); strings.Contains(q, "4d4b:") {
		t.Errorf("macake's root stayed on the renamed device:\n%s", q)
	}
	cli.Exec("ip", "link", "set", "dev", "wan1", "name", ClientDev)
	cli.Exec("ip", "link", "set", "dev", ClientDev, "up")
	m.MustRun(t, 0, "apply")
	mustContain(t, "the upload class after the name is back", cli.Exec("tc", "class", "show", "dev", ClientDev), "rate 8Mbit")
	m.MustRun(t, 0, "down")
}

// TestApplyOneDirectionAtATime: on this kernel, a policy that leaves its
// download unshaped (download_mode = "off") gets the upload class and no
// IFB; turned round (upload off, download fixed) the root qdisc goes and
// the IFB comes; each apply is then converged.
func TestApplyOneDirectionAtATime(t *testing.T) {
	cli, m := faultLab(t)
	uploadOnly := strings.Replace(fixedWAN, `mode = "fixed"`, `mode = "fixed"`+"\ndownload_mode = \"off\"", 1)
	m.SetPolicy(t, "wan", uploadOnly)
	m.MustRun(t, 0, "apply")
	mustContain(t, "the upload class", cli.Exec("tc", "class", "show", "dev", ClientDev), "rate 8Mbit")
	if links := cli.Exec("ip", "link", "show"); strings.Contains(links, tc.IFBPrefix) {
		t.Errorf("an IFB was created for a download that is off:\n%s", links)
	}
	mustContain(t, "the apply after converging", m.MustRun(t, 0, "apply").Stdout, "No changes.")

	downloadOnly := strings.Replace(fixedWAN, `mode = "fixed"`, `mode = "fixed"`+"\nupload_mode = \"off\"", 1)
	m.SetPolicy(t, "wan", downloadOnly)
	turned := m.MustRun(t, 0, "apply")
	mustContain(t, "the apply that turns the link round", turned.Stdout, "- shaper on wan0", "+ ifb ifb-macake0")
	if q := cli.Exec("tc", "qdisc", "show", "dev", ClientDev); strings.Contains(q, "4d4b:") {
		t.Errorf("macake's root stayed on wan0 with upload off:\n%s", q)
	}
	mustContain(t, "the download class", cli.Exec("tc", "class", "show", "dev", tc.IFBName(0)), "rate 40Mbit")
	mustContain(t, "the apply after converging", m.MustRun(t, 0, "apply").Stdout, "No changes.")
	m.MustRun(t, 0, "down")
}
