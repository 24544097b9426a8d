// SPDX-License-Identifier: Apache-2.0

// Package cakevm_test checks the cakevm harness itself (run.sh, init,
// setup.sh): a command's exit status and output come back from the guest,
// the guest has a real sch_cake, and a guest that does not boot or does not
// finish fails with its console's tail instead of hanging. Each test boots
// a guest (seconds under TCG); without a set-up harness they skip.
package cakevm_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// run runs run.sh with args and returns its exit status, stdout and stderr.
// A run.sh that outlives limit is a hang: the test fails.
func run(t *testing.T, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	if out, err := exec.Command("./setup.sh", "--check").CombinedOutput(); err != nil {
		t.Skipf("skipping: cakevm is not set up here (%s); internal/cakevm/setup.sh sets it up", bytes.TrimSpace(out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "./run.sh", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("run.sh %v did not return within %s: it hangs\nstderr:\n%s", args, limit, stderr.String())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// A command runs as root in a guest booting Debian's kernel, where tc adds
// a real CAKE; its stdout and stderr come back apart, unmangled, and its
// exit status is run.sh's. Without kvm_intel or kvm_amd the guest runs
// under TCG.
func TestCommandRunsInAGuestWithRealCake(t *testing.T) {
	code, out, errOut := run(t, 5*time.Minute, "--", "bash", "-c",
		`uname -r; id -u; tc qdisc add dev lo root cake bandwidth 10mbit && tc -j qdisc show dev lo; echo on-stderr >&2; exit 3`)
	if code != 3 {
		t.Errorf("exit status %d, want the command's 3\nstderr:\n%s", code, errOut)
	}
	kver, err := os.ReadFile(cakevmDir() + "/kver")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(out, "\n", 3)
	if len(lines) < 3 || lines[0] != strings.TrimSpace(string(kver)) || lines[1] != "0" {
		t.Errorf("the guest's kernel and user: %q, want %q and root", lines, strings.TrimSpace(string(kver)))
	}
	if !strings.Contains(out, `"kind":"cake"`) || !strings.Contains(out, `"bandwidth":1250000`) {
		t.Errorf("no CAKE at 10 Mbit/s (1250000 bytes/s) on the guest's lo:\n%s", out)
	}
	if strings.Contains(out, "on-stderr") || strings.Contains(out, "\r") || !strings.Contains(errOut, "on-stderr") {
		t.Errorf("stdout %q and stderr %q are mixed or mangled", out, errOut)
	}
	_, intel := os.Stat("/sys/module/kvm_intel")
	_, amd := os.Stat("/sys/module/kvm_amd")
	if intel != nil && amd != nil && !strings.Contains(errOut, "accel=tcg") {
		t.Errorf("without kvm_intel or kvm_amd the guest must run under TCG:\n%s", errOut)
	}
}

// A guest whose kernel finds no init panics and powers off: run.sh fails
// with 125 and the console's tail, which shows why.
func TestAGuestThatDoesNotBootFailsWithItsConsole(t *testing.T) {
	code, _, errOut := run(t, 5*time.Minute, "--append", "rdinit=/nonexistent", "--", "true")
	if code != 125 || !strings.Contains(errOut, "did not boot") || !strings.Contains(errOut, "Kernel panic") {
		t.Errorf("exit status %d, stderr:\n%s\nwant 125 and the console's kernel panic", code, errOut)
	}
}

// A command that does not finish is killed at --timeout: run.sh fails with
// 124 and the console's tail (which shows the guest booted), and returns.
func TestAGuestThatHangsIsKilledWithItsConsole(t *testing.T) {
	code, _, errOut := run(t, 5*time.Minute, "--timeout", "30", "--", "sleep", "600")
	if code != 124 || !strings.Contains(errOut, "did not finish within 30 s") || !strings.Contains(errOut, "cakevm: root ready") {
		t.Errorf("exit status %d, stderr:\n%s\nwant 124 and the console's tail", code, errOut)
	}
}

func cakevmDir() string {
	if d := os.Getenv("CAKEVM_DIR"); d != "" {
		return d
	}
	return "/var/tmp/macake-cakevm"
}
