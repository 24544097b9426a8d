// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/netns"
)

// BuildMacake builds the macake binary into dir (go test puts the go tool
// first on PATH).
func BuildMacake(tb testing.TB, dir string) string {
	tb.Helper()
	bin := filepath.Join(dir, "macake")
	cmd := execrun.Command{Argv: []string{"go", "build", "-o", bin, "github.com/macake/macake/cmd/macake"}}
	res, err := execrun.Exec{Timeout: 5 * time.Minute, Env: []string{"CGO_ENABLED=0"}}.Run(context.Background(), cmd)
	if _, err := execrun.Check(cmd, res, err); err != nil {
		tb.Fatalf("building macake: %v", err)
	}
	return bin
}

// Macake runs the real macake binary inside a namespace, as root, with its
// own config and state directories and a link-facts file naming the
// namespace's interface (MACAKE_LINK_FACTS), on the tc backend.
type Macake struct {
	// Bin is the macake binary; NS the namespace it runs in.
	Bin string
	NS  *netns.Namespace
	// ConfigDir, StateDir and FactsFile are its own, under a temporary
	// directory: --config-dir, --state-dir and MACAKE_LINK_FACTS.
	ConfigDir, StateDir, FactsFile string
	// Env is added to every run: MACAKE_BACKEND=tc, MACAKE_LINK_FACTS,
	// NO_COLOR; tests add tool overrides.
	Env []string
}

// NewMacake prepares directories for bin in ns; iface is the interface the
// facts file reports up, with gateway the ISP's router.
func NewMacake(tb testing.TB, bin string, ns *netns.Namespace, iface, gateway string) *Macake {
	tb.Helper()
	root := tb.TempDir()
	m := &Macake{Bin: bin, NS: ns, ConfigDir: filepath.Join(root, "links.d"), StateDir: filepath.Join(root, "state"),
		FactsFile: filepath.Join(root, "facts.json")}
	for _, d := range []string{m.ConfigDir, m.StateDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	m.SetFacts(tb, fmt.Sprintf(`{"interfaces":[{"name":%q,"up":true,"gateway_ip":%q}]}`, iface, gateway))
	m.Env = []string{"MACAKE_BACKEND=tc", "MACAKE_LINK_FACTS=" + m.FactsFile, "NO_COLOR=1"}
	return m
}

// SetFacts replaces the link-facts file.
func (m *Macake) SetFacts(tb testing.TB, facts string) {
	tb.Helper()
	if err := os.WriteFile(m.FactsFile, []byte(facts), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// SetPolicy writes links.d/NAME.toml, replacing every other policy.
func (m *Macake) SetPolicy(tb testing.TB, name, text string) {
	tb.Helper()
	entries, _ := os.ReadDir(m.ConfigDir)
	for _, e := range entries {
		os.Remove(filepath.Join(m.ConfigDir, e.Name()))
	}
	if err := os.WriteFile(filepath.Join(m.ConfigDir, name+".toml"), []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// Result is one finished macake run: its exit status and output.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// String shows the whole result, for test failures.
func (r Result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
}

// Run runs `macake --config-dir … --state-dir … ARGS` in the namespace and
// waits for it (at most timeout). A run that could not start or was killed
// is an error; any exit status is a Result.
func (m *Macake) Run(ctx context.Context, timeout time.Duration, args ...string) (Result, error) {
	argv := append([]string{"ip", "netns", "exec", m.NS.Name(), m.Bin, "--config-dir", m.ConfigDir, "--state-dir", m.StateDir}, args...)
	res, err := execrun.Exec{Timeout: timeout, Env: m.Env}.Run(ctx, execrun.Command{Argv: argv})
	return Result{Code: res.ExitCode, Stdout: string(res.Stdout), Stderr: string(res.Stderr)}, err
}

// MustRun runs macake and fails the test unless it exits with want.
func (m *Macake) MustRun(tb testing.TB, want int, args ...string) Result {
	tb.Helper()
	r, err := m.Run(context.Background(), time.Minute, args...)
	if err != nil {
		tb.Fatalf("macake %s: %v\n%s", strings.Join(args, " "), err, r)
	}
	if r.Code != want {
		tb.Fatalf("macake %s: want exit %d, got %s", strings.Join(args, " "), want, r)
	}
	return r
}

// ApplyShaper shapes with one `macake apply` and removes it with
// `macake down`: the fixed-rate reference.
type ApplyShaper struct {
	// M is the macake to run.
	M *Macake
}

// Start runs macake apply.
func (s ApplyShaper) Start(ctx context.Context) error {
	r, err := s.M.Run(ctx, time.Minute, "apply")
	if err == nil && r.Code != 0 {
		err = fmt.Errorf("macake apply: %s", r)
	}
	return err
}

// Stop runs macake down.
func (s ApplyShaper) Stop(ctx context.Context) (*ProcessCost, error) {
	r, err := s.M.Run(ctx, time.Minute, "down")
	if err == nil && r.Code != 0 {
		err = fmt.Errorf("macake down: %s", r)
	}
	return nil, err
}

// WatchShaper runs `macake watch` as a process in the namespace for the
// length of a phase, and `macake down` after it.
type WatchShaper struct {
	// M is the macake to run.
	M *Macake
	// Args are extra arguments after "watch".
	Args []string
	// Ready reports whether the shaping is in place (e.g. macake's root
	// qdisc is on the interface); Start waits for it.
	Ready func(ctx context.Context) bool

	pid     int
	started time.Time
	cpu0    time.Duration
	done    chan struct{}
	stopped bool // Stop ran since Start
	mu      sync.Mutex
	result  Result
	err     error
}

// StartFor starts watch for the test t (Start, failing t when it does not
// start) and stops it when t ends, unless the test stopped it first.
func (s *WatchShaper) StartFor(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(ctx) })
}

// Start launches watch and waits until Ready.
func (s *WatchShaper) Start(ctx context.Context) error {
	s.done, s.stopped = make(chan struct{}), false
	go func() {
		defer close(s.done)
		r, err := s.M.Run(context.Background(), time.Hour, append([]string{"watch"}, s.Args...)...)
		s.mu.Lock()
		s.result, s.err = r, err
		s.mu.Unlock()
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s.pid == 0 {
			s.pid = findProcess(s.M.Bin, s.M.StateDir, "watch")
			if s.pid != 0 {
				s.started = time.Now()
				s.cpu0, _, _, _ = readProcessCost(s.pid)
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("macake watch exited: %s (%v)", s.result, s.err)
		default:
		}
		if s.pid != 0 && (s.Ready == nil || s.Ready(ctx)) {
			return nil
		}
		if time.Now().After(deadline) {
			s.Stop(ctx)
			return fmt.Errorf("macake watch did not install its shaper within 30s")
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// Stop reads the process's cost, sends SIGTERM, waits for it to exit and
// runs macake down. Once stopped, it does nothing until the next Start.
func (s *WatchShaper) Stop(ctx context.Context) (*ProcessCost, error) {
	if s.stopped {
		return nil, nil
	}
	s.stopped = true
	var cost *ProcessCost
	if s.pid != 0 {
		cpu, rss, hwm, err := readProcessCost(s.pid)
		if err == nil {
			cost = &ProcessCost{CPU: cpu - s.cpu0, Wall: time.Since(s.started), RSS: rss, MaxRSS: hwm}
		}
		syscall.Kill(s.pid, syscall.SIGTERM)
	}
	var errs []error
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		if s.pid != 0 {
			syscall.Kill(s.pid, syscall.SIGKILL)
		}
		<-s.done
		errs = append(errs, errors.New("macake watch did not exit within 30s of SIGTERM"))
	}
	s.mu.Lock()
	if s.result.Code != 0 {
		errs = append(errs, fmt.Errorf("macake watch: %s", s.result))
	}
	s.mu.Unlock()
	s.pid = 0
	r, err := s.M.Run(ctx, time.Minute, "down")
	if err == nil && r.Code != 0 {
		err = fmt.Errorf("macake down: %s", r)
	}
	return cost, errors.Join(append(errs, err)...)
}

// Output returns what the watch process printed (after Stop).
func (s *WatchShaper) Output() Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result
}

// findProcess returns the pid of the process whose command line has bin,
// the argument arg and the word word, or 0.
func findProcess(bin, arg, word string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(argv) > 0 && argv[0] == bin && contains(argv, arg) && contains(argv, word) {
			return pid
		}
	}
	return 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// readProcessCost reads user+system CPU time from /proc/PID/stat and the
// resident set (VmRSS) and its peak (VmHWM) from /proc/PID/status.
func readProcessCost(pid int) (cpu time.Duration, rss, hwm int64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	// The command name may hold spaces; the fields after it start past ')'.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 13 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	cpu = time.Duration(utime+stime) * time.Second / clockTicks
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return cpu, 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			hwm = kb << 10
		}
	}
	return cpu, rss, hwm, sc.Err()
}
