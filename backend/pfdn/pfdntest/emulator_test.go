// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/execrun"
)

func TestFaultFailsTheNthMatchingCall(t *testing.T) {
	e := newTestEmulator()
	if err := e.AddFault(Fault{Match: `^dnctl pipe \d+ config`, Nth: 2, Kind: Fail}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, e, "", dnctlPath, "list")
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config")
	o := run(t, e, "", dnctlPath, "pipe", "2", "config")
	if o.code != 1 || o.stderr != "dnctl: injected failure (pfdntest)\n" {
		t.Errorf("2nd config: %+v", o)
	}
	mustRun(t, e, "", dnctlPath, "pipe", "3", "config")
	if got := e.Snapshot().Pipes; len(got) != 2 || got[2] != "" {
		t.Errorf("the failed call must have no effect: %v", got)
	}
	calls := e.Calls()
	if len(calls) != 4 || calls[2].Fault != "fail" || !calls[2].Mutating || calls[0].Mutating {
		t.Errorf("call log: %+v", calls)
	}
}

func TestFaultAfterEffectAndGarbage(t *testing.T) {
	e := newTestEmulator()
	e.AddFault(Fault{MutatingOnly: true, Nth: 1, Kind: Fail, AfterEffect: true, ExitCode: 65, Stderr: "boom\n"})
	if o := run(t, e, "", dnctlPath, "pipe", "5", "config"); o.code != 65 || o.stderr != "boom\n" {
		t.Errorf("after-effect fault: %+v", o)
	}
	if _, ok := e.Snapshot().Pipes[5]; !ok {
		t.Error("an after-effect fault must carry the command out")
	}
	e.ClearFaults()
	e.AddFault(Fault{Match: "list", Kind: Garbage})
	if o := mustRun(t, e, "", dnctlPath, "list"); o.stdout != garbage {
		t.Errorf("garbage: %q", o.stdout)
	}
	if err := e.AddFault(Fault{Match: "("}); err == nil {
		t.Error("a bad pattern must be refused")
	}
}

func TestFaultRewritesOneStream(t *testing.T) {
	e := newTestEmulator()
	mustRun(t, e, "", dnctlPath, "pipe", "7", "config", "bw", "1234Kbit/s")
	if err := e.AddFault(Fault{Match: "^dnctl list", Kind: Rewrite, Find: `(\d)\.234 Mbit/s`, Replace: "${1}.233 Mbit/s"}); err != nil {
		t.Fatal(err)
	}
	if o := mustRun(t, e, "", dnctlPath, "list"); !strings.HasPrefix(o.stdout, "00007:   1.233 Mbit/s ") {
		t.Errorf("rewritten stdout: %q", o.stdout)
	}
	e.ClearFaults()
	e.AddFault(Fault{Match: "^pfctl", Kind: Rewrite, Stream: "stderr", Find: "(?m)^ALTQ related functions disabled\n", Replace: ""})
	if o := mustRun(t, e, "", pfctlPath, "-s", "info"); o.stderr != "No ALTQ support in kernel\n" {
		t.Errorf("rewritten stderr: %q", o.stderr)
	}
	for _, bad := range []Fault{{Kind: Rewrite}, {Kind: Rewrite, Find: "("}, {Kind: Rewrite, Find: "x", Stream: "stdin"}} {
		if err := e.AddFault(bad); err == nil {
			t.Errorf("fault %+v must be refused", bad)
		}
	}
}

func TestFaultHangReturnsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTestEmulator()
		e.AddFault(Fault{Match: "pfctl", Kind: Hang})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		_, err := e.Run(ctx, execrun.Command{Argv: []string{pfctlPath, "-s", "info"}})
		var ee *execrun.Error
		if !errors.As(err, &ee) || ee.ExitCode != -1 || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("hang: %v", err)
		}
		if time.Since(start) != 10*time.Second {
			t.Errorf("returned after %v", time.Since(start))
		}
	})
}

func TestMissingToolsLookLikeMissingBinaries(t *testing.T) {
	e := newTestEmulator()
	e.SetToolsMissing(true)
	_, err := e.Run(context.Background(), execrun.Command{Argv: []string{pfctlPath, "-s", "info"}})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want a not-exist error", err)
	}
	if _, err := e.Run(context.Background(), execrun.Command{Argv: []string{"/bin/true"}}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("unknown program: %v", err)
	}
}

func TestIsMutating(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want bool
	}{
		{[]string{"pfctl", "-s", "dummynet"}, false},
		{[]string{"pfctl", "-a", "com.apple/macake", "-s", "dummynet"}, false},
		{[]string{"pfctl", "-sr"}, false},
		{[]string{"pfctl", "-vsr"}, false},
		{[]string{"pfctl", "-a", "x", "-f", "-"}, true},
		{[]string{"pfctl", "-nf", "-"}, false},
		{[]string{"pfctl", "-E"}, true},
		{[]string{"pfctl", "-X", "1"}, true},
		{[]string{"pfctl", "-a", "x", "-F", "all"}, true},
		{[]string{"pfctl", "-a", "-f", "-s", "info"}, false}, // "-f" is -a's argument
		{[]string{"dnctl", "list"}, false},
		{[]string{"dnctl", "pipe", "1", "show"}, false},
		{[]string{"dnctl", "-q", "flush"}, true},
		{[]string{"dnctl", "pipe", "1", "config", "bw", "1"}, true},
		{[]string{"dnctl", "pipe", "delete", "1"}, true},
		{[]string{"dnctl", "-n", "pipe", "1", "config"}, false},
		{[]string{"dnctl", "p 1 config"}, true},
	} {
		if got := IsMutating(c.argv); got != c.want {
			t.Errorf("IsMutating(%v) = %v, want %v", c.argv, got, c.want)
		}
	}
}

func TestForeignActors(t *testing.T) {
	e := newTestEmulator()
	ctx := context.Background()
	tok := e.TakeReference(321, "nlcd")
	if r, err := e.Foreign(ctx, "", pfctlPath, "-s", "References"); err != nil || !strings.Contains(string(r.Stdout), "321      nlcd                         "+strconv.FormatUint(tok, 10)) {
		t.Errorf("reference held by a daemon: %q %v", r.Stdout, err)
	}
	e.DisablePF()
	if s := e.Snapshot(); s.PFEnabled || len(s.References) != 0 {
		t.Errorf("after DisablePF: %+v", s)
	}
	if len(e.Calls()) != 0 {
		t.Error("foreign calls must not be recorded")
	}
	mustRun(t, e, "", dnctlPath, "pipe", "9", "config")
	e.FlushDummynet()
	if len(e.Snapshot().Pipes) != 0 {
		t.Error("FlushDummynet left pipes")
	}
	mustRun(t, e, "dummynet out on en0 all pipe 1\n", pfctlPath, "-a", "com.apple/macake", "-f", "-")
	e.DeleteAnchor("com.apple/macake")
	if _, ok := e.Snapshot().Rulesets["com.apple/macake"]; ok {
		t.Error("DeleteAnchor left the anchor")
	}
}

func TestConcurrentCallsAreSerialised(t *testing.T) {
	e := newTestEmulator()
	var wg sync.WaitGroup
	for i := 1; i <= 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.Run(context.Background(), execrun.Command{Argv: []string{dnctlPath, "pipe", strconv.Itoa(i), "config"}})
			e.Run(context.Background(), execrun.Command{Argv: []string{dnctlPath, "list"}})
		}()
	}
	wg.Wait()
	if n := len(e.Snapshot().Pipes); n != 50 {
		t.Errorf("%d pipes, want 50", n)
	}
}

// TestBinariesShareAStateFile builds the two emulator binaries and drives
// them as real processes, concurrently, through one state file.
func TestBinariesShareAStateFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	if os.Geteuid() != 0 {
		t.Skip("the binaries refuse a user as pfctl and dnctl do on a Mac; run the tests as root, as CI does")
	}
	dir := t.TempDir()
	bins := BuildBinaries(t, dir)
	stateFile := filepath.Join(dir, "state.json")
	r := execrun.Exec{Env: []string{EnvState + "=" + stateFile}, Timeout: time.Minute}
	ctx := context.Background()
	runBin := func(stdin string, argv ...string) execrun.Result {
		t.Helper()
		res, err := r.Run(ctx, execrun.Command{Argv: argv, Stdin: stdin})
		if err != nil {
			t.Fatalf("%v: %v", argv, err)
		}
		return res
	}
	var wg sync.WaitGroup
	for i := 1; i <= 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Run(ctx, execrun.Command{Argv: []string{bins.Dnctl, "pipe", strconv.Itoa(48000 + i), "config", "bw", "1000Kbit/s"}})
			if err != nil || res.ExitCode != 0 {
				t.Errorf("concurrent config %d: %v %+v", i, err, res)
			}
		}()
	}
	wg.Wait()
	res := runBin("", bins.Dnctl, "list")
	if n := strings.Count(string(res.Stdout), "Mbit/s"); n != 20 {
		t.Errorf("%d pipes listed, want 20:\n%s", n, res.Stdout)
	}
	res = runBin("dummynet out on en0 all pipe 48001\n", bins.Pfctl, "-a", "com.apple/macake", "-f", "-")
	if res.ExitCode != 0 || !strings.HasPrefix(string(res.Stderr), "pfctl: Use of -f option") {
		t.Errorf("load: %+v", res)
	}
	if res = runBin("", bins.Pfctl, "-a", "com.apple/macake", "-s", "dummynet"); string(res.Stdout) != "dummynet out on en0 all pipe 48001\n" {
		t.Errorf("read back: %q", res.Stdout)
	}
	if res = runBin("", bins.Dnctl, "pipe", "delete", "99"); res.ExitCode != 1 || string(res.Stderr) != "dnctl: rule 99: setsockopt(IP_DUMMYNET_DEL): Invalid argument\n" {
		t.Errorf("delete missing: %+v", res)
	}
	// Tests prepare and inspect the shared state through UpdateFile.
	err := UpdateFile(stateFile, func(e *Emulator) error {
		if len(e.Snapshot().Pipes) != 20 {
			t.Errorf("state file holds %d pipes", len(e.Snapshot().Pipes))
		}
		return e.AddFault(Fault{Match: "^pfctl -E", Kind: Fail})
	})
	if err != nil {
		t.Fatal(err)
	}
	if res = runBin("", bins.Pfctl, "-E"); res.ExitCode != 1 {
		t.Errorf("fault across processes: %+v", res)
	}
	err = UpdateFile(stateFile, func(e *Emulator) error {
		e.ClearFaults()
		return e.AddFault(Fault{Match: "^pfctl -s info", Kind: Hang})
	})
	if err != nil {
		t.Fatal(err)
	}
	hang := execrun.Exec{Env: r.Env, Timeout: 300 * time.Millisecond}
	if _, err := hang.Run(ctx, execrun.Command{Argv: []string{bins.Pfctl, "-s", "info"}}); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("hang fault: %v", err)
	}
	// The hung process released the lock before hanging.
	if res = runBin("", bins.Dnctl, "pipe", "48001", "show"); res.ExitCode != 0 {
		t.Errorf("after a hang: %+v", res)
	}
	bad := execrun.Exec{Env: []string{EnvState + "="}}
	if res, err := bad.Run(ctx, execrun.Command{Argv: []string{bins.Dnctl, "list"}}); err != nil || res.ExitCode != 70 || !strings.Contains(string(res.Stderr), EnvState) {
		t.Errorf("without %s: %+v %v", EnvState, res, err)
	}
	if runtime.GOOS == "linux" {
		if _, err := os.Stat(stateFile + ".lock"); err != nil {
			t.Errorf("lock file: %v", err)
		}
	}
}

// TestBinariesRefuseUsers: the emulator binaries answer a caller who is
// not root as pfctl and dnctl do on a Mac, and such a caller writes
// neither the shared state nor its lock (the README's dry run as a user
// beside a root-owned state file, issue 12 item 19).
func TestBinariesRefuseUsers(t *testing.T) {
	stateFile := filepath.Join(t.TempDir(), "state.json")
	getenv := func(k string) string {
		if k == EnvState {
			return stateFile
		}
		return ""
	}
	run := func(uid int, args ...string) (int, string) {
		t.Helper()
		old := geteuid
		geteuid = func() int { return uid }
		defer func() { geteuid = old }()
		var out, errb strings.Builder
		code := Main(args, nil, &out, &errb, getenv)
		return code, errb.String()
	}
	for _, tt := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"/sbin/pfctl", "-s", "info"}, 1, "pfctl: /dev/pf: Permission denied\n"},
		{[]string{"/usr/sbin/dnctl", "list"}, 69, "dnctl: socket: Operation not permitted\n"},
	} {
		before, _ := os.ReadFile(stateFile)
		if code, stderr := run(501, tt.args...); code != tt.code || stderr != tt.stderr {
			t.Errorf("%v as a user: exit %d, stderr %q; want %d, %q", tt.args, code, stderr, tt.code, tt.stderr)
		}
		if after, _ := os.ReadFile(stateFile); string(after) != string(before) {
			t.Errorf("%v as a user changed the state file:\n%s\n->\n%s", tt.args, before, after)
		}
		if before == nil {
			if _, err := os.Stat(stateFile + ".lock"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%v as a user created the lock file: %v", tt.args, err)
			}
		}
		if code, stderr := run(0, tt.args...); code != 0 {
			t.Errorf("%v as root after a user's call: exit %d, stderr %q", tt.args, code, stderr)
		}
	}
}
