// SPDX-License-Identifier: Apache-2.0

// Package openwrt holds the tests of the OpenWrt example beside it: the
// procd init script and the router's policy. Nothing here runs OpenWrt;
// see docs/LINUX.md, "On a Linux router", for what has not been run there.
package openwrt

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
)

// TestInitScriptParsesAndLints: the init script is valid sh (dash here;
// OpenWrt runs it with BusyBox ash through /etc/rc.common) and, where
// shellcheck is installed, passes it.
func TestInitScriptParsesAndLints(t *testing.T) {
	if out, err := exec.Command("sh", "-n", "macake.init").CombinedOutput(); err != nil {
		t.Fatalf("sh -n macake.init: %v\n%s", err, out)
	}
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Skip("skipping the lint: shellcheck not installed (apt-get install shellcheck)")
	}
	if out, err := exec.Command("shellcheck", "--shell=sh", "macake.init").CombinedOutput(); err != nil {
		t.Errorf("shellcheck macake.init: %v\n%s", err, out)
	}
}

// TestInitScriptHandsProcdTheWatch sources the init script as
// /etc/rc.common does, with procd's functions replaced by ones that print
// their arguments, and checks what start_service hands procd: macake
// watch on the default directories, respawned, its output logged, a
// SIGTERM's grace; and that it creates the state directory, mode 0700.
func TestInitScriptHandsProcdTheWatch(t *testing.T) {
	state := t.TempDir() + "/state"
	script := `
procd_open_instance() { echo "open"; }
procd_set_param() { echo "param $*"; }
procd_close_instance() { echo "close"; }
. ./macake.init
STATE_DIR=$1
start_service
echo "procd=$USE_PROCD start=$START stop=$STOP"
`
	out, err := exec.Command("sh", "-c", script, "sh", state).CombinedOutput()
	if err != nil {
		t.Fatalf("start_service: %v\n%s", err, out)
	}
	want := strings.Join([]string{
		"open",
		"param command /usr/bin/macake --config-dir /etc/macake/links.d --state-dir " + state + " watch",
		"param respawn 3600 30 5",
		"param stdout 1",
		"param stderr 1",
		"param term_timeout 15",
		"close",
		"procd=1 start=99 stop=10",
	}, "\n") + "\n"
	if string(out) != want {
		t.Errorf("what the script hands procd:\n%s\nwant:\n%s", out, want)
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
		t.Errorf("state directory: %v, %v", fi, err)
	}
	// Its state directory is macake's Linux default, so a plain `macake
	// status` or `macake down` on the router finds the daemon.
	text, err := os.ReadFile("macake.init")
	if err != nil {
		t.Fatal(err)
	}
	if want := "\nSTATE_DIR=" + settings.DefaultStateDirFor("linux") + "\n"; !strings.Contains(string(text), want) {
		t.Errorf("the script's state directory is not the Linux default: it lacks %q", want)
	}
}

// TestRouterPolicyValidatesForLinux: the shipped policy is valid for the
// tc backend without a warning.
func TestRouterPolicyValidatesForLinux(t *testing.T) {
	links, warnings, err := config.Load("links.d", config.LoadOptions{Target: config.TargetLinux, SkipOwnershipCheck: true})
	if err != nil || len(warnings) != 0 || len(links) != 1 || links[0].Name != "wan" {
		t.Fatalf("links.d: %v, %v, warnings %v", links, err, warnings)
	}
	p := links[0]
	if p.Match.Interface != "pppoe-wan" || p.Shaper.Overhead.Keyword != "pppoe-ptm" || !p.Cake.NAT || p.Cake.EgressIsolation != "dual-srchost" {
		t.Errorf("the router policy is not the one docs/LINUX.md describes: %+v", p)
	}
}
