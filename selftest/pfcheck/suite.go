// SPDX-License-Identifier: Apache-2.0

// Package pfcheck is `macake selftest` for pf and dummynet: the checks that
// exercise, on this Mac, every behaviour of pfctl, dnctl and the kernel
// that macake and its emulator (backend/pfdn/pfdntest) rely on, the
// normalizers that make a real answer comparable with the emulator's, the
// loopback measurement that proves dummynet shapes as the simulator
// assumes, and the removal of the scratch objects it creates.
//
// Only scratch objects are touched: the anchor ScratchAnchor, two pipes
// in ScratchPipes that nothing else uses, pf enable references of its own
// (pfctl -E, released with -X), and traffic on lo0 to one port of a
// listener this process opened. The main ruleset is read, never written;
// pf is never disabled (-d) and never enabled without a token (-e).
package pfcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/selftest/check"
	"github.com/macake/macake/selftest/loopback"
	"github.com/macake/macake/selftest/scratch"
)

// ScratchAnchor is the selftest's pf anchor: a child of com.apple, so the
// stock main ruleset evaluates it as it evaluates com.apple/macake.
const ScratchAnchor = "com.apple/macake-selftest"

// ScratchPipes is the range the selftest takes its two pipes from: above
// macake's default range and Network Link Conditioner's pipes, and within
// what a pf rule can name. Only numbers no pipe uses are taken.
var ScratchPipes = pfdn.PipeRange{First: 65000, Last: 65063}

// The emulator's tool paths; it tells the tools apart by base name.
const (
	emuPfctl = "/sbin/pfctl"
	emuDnctl = "/usr/sbin/dnctl"
)

// Traffic sends a few TCP packets to dst on lo0, through whatever rule
// matches them.
type Traffic func(ctx context.Context, dst netip.AddrPort) error

// Options configure the pf suite.
type Options struct {
	// Runner runs the real tools (execrun.Exec on a Mac; the emulator in
	// tests and on Linux).
	Runner execrun.Runner
	// Pfctl and Dnctl are the real tools' paths.
	Pfctl, Dnctl string
	// Ledger records each scratch object before it exists.
	Ledger *scratch.Ledger
	// Avoid is macake's own pipe range; the scratch pipes never fall in it.
	Avoid pfdn.PipeRange
	// Traffic makes the real side's packets; nil sends real TCP to the
	// suite's listener (a Mac). An emulator passes EmulatorTraffic.
	Traffic Traffic
	// NoPacketPath, when set, says why dummynet's shaping cannot be
	// measured here (the real side is the emulator); the lo0 measurement
	// is then skipped with this reason.
	NoPacketPath string
	// SkipMeasure skips the lo0 measurement (selftest --quick).
	SkipMeasure bool
	// Measure tunes the lo0 measurement; the zero value is its default.
	Measure loopback.Config
}

// Suite is one pf selftest: both sides, the scratch objects' numbers and
// the listener the scratch rule sends through a pipe.
type Suite struct {
	opts     Options
	emu      *pfdntest.Emulator
	real     *check.Side
	expected *check.Side
	server   *loopback.Server
	pipe     int
	pipe2    int
	setup    []string
}

// New prepares a suite: it picks two free scratch pipes (recording them
// and the anchor in the ledger before anything exists), opens the lo0
// listener and mirrors into the emulator what other tools legitimately
// hold on this Mac (pf enable references), so that the answers can be
// compared. It changes nothing on the system.
func New(ctx context.Context, o Options) (*Suite, error) {
	if o.Runner == nil || o.Ledger == nil || o.Pfctl == "" || o.Dnctl == "" {
		return nil, errors.New("pfcheck: New needs a runner, the tools' paths and a ledger")
	}
	s := &Suite{opts: o, emu: pfdntest.New()}
	live, err := s.readDummynet(ctx)
	if err != nil {
		return nil, err
	}
	if s.pipe, s.pipe2, err = pickPipes(live, o.Avoid); err != nil {
		return nil, err
	}
	// Leftovers in this state directory are gone by now: rules in the
	// scratch anchor are another selftest's, and must not be recorded
	// (and flushed) as ours.
	if err := s.anchorFree(ctx); err != nil {
		return nil, err
	}
	if err := o.Ledger.SetAnchor(ScratchAnchor); err != nil {
		return nil, err
	}
	for _, n := range []int{s.pipe, s.pipe2} {
		if err := o.Ledger.AddPipe(n); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("opening the loopback listener: %w", err)
	}
	s.server = loopback.Serve(ln)
	if err := s.mirror(ctx); err != nil {
		s.server.Close()
		return nil, err
	}
	shared := check.Vars{
		"anchor": ScratchAnchor,
		"pipe":   strconv.Itoa(s.pipe),
		"pipe2":  strconv.Itoa(s.pipe2),
		"port":   strconv.Itoa(int(s.server.Addr().Port())),
	}
	s.real = &check.Side{Name: "real", Runner: o.Runner, Real: true, Vars: with(shared, "pfctl", o.Pfctl, "dnctl", o.Dnctl)}
	s.expected = &check.Side{Name: "emulator", Runner: s.emu, Vars: with(shared, "pfctl", emuPfctl, "dnctl", emuDnctl)}
	return s, nil
}

func with(v check.Vars, kv ...string) check.Vars {
	out := check.Vars{}
	for k, val := range v {
		out[k] = val
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// Real and Expected are the two sides.
func (s *Suite) Real() *check.Side     { return s.real }
func (s *Suite) Expected() *check.Side { return s.expected }

// Setup says what New did, for the report.
func (s *Suite) Setup() []string { return s.setup }

// Describe names the two sides for the report.
func (s *Suite) Describe() (real, expected string) {
	return fmt.Sprintf("%s and %s", s.opts.Pfctl, s.opts.Dnctl),
		"the pfdntest emulator (in-process), with this Mac's pf references mirrored"
}

// Close stops the listener and removes every scratch object the ledger
// names (see RemoveScratch).
func (s *Suite) Close(ctx context.Context) (done []string, errs []error) {
	if s.server != nil {
		s.server.Close()
	}
	return RemoveScratch(ctx, s.opts.Runner, s.opts.Pfctl, s.opts.Dnctl, s.opts.Ledger.Record(), time.Now())
}

func (s *Suite) readDummynet(ctx context.Context) (pfdn.Dummynet, error) {
	cmd := execrun.Command{Argv: []string{s.opts.Dnctl, "list"}}
	res, err := runChecked(ctx, s.opts.Runner, cmd)
	if err != nil {
		return pfdn.Dummynet{}, fmt.Errorf("listing the dummynet pipes: %w", err)
	}
	d, err := pfdn.ParseDummynet(res.Stdout)
	if err != nil {
		return pfdn.Dummynet{}, fmt.Errorf("listing the dummynet pipes: %w", err)
	}
	return d, nil
}

// anchorFree fails when the scratch anchor holds rules.
func (s *Suite) anchorFree(ctx context.Context) error {
	cmd := execrun.Command{Argv: []string{s.opts.Pfctl, "-a", ScratchAnchor, "-s", "dummynet"}}
	res, err := runChecked(ctx, s.opts.Runner, cmd)
	if err != nil {
		return fmt.Errorf("reading the scratch anchor: %w", err)
	}
	rules, err := pfdn.ParseRules(res.Stdout, res.Stderr)
	if err != nil {
		return fmt.Errorf("reading the scratch anchor: %w", err)
	}
	if rules.Exists && len(rules.Rules) > 0 {
		return fmt.Errorf("pf anchor %s holds rules: another macake selftest is running on this Mac, or one killed while using another --state-dir left them (then: sudo pfctl -a %s -F all)", ScratchAnchor, ScratchAnchor)
	}
	return nil
}

// pickPipes returns the first free scratch pipe and a second one in the
// same listing bucket (dnctl.order needs two there).
func pickPipes(live pfdn.Dummynet, avoid pfdn.PipeRange) (first, second int, err error) {
	r := ScratchPipes
	if avoid.Last >= r.First && avoid.First <= r.Last {
		return 0, 0, fmt.Errorf("macake's pipe range %s overlaps the selftest's scratch range %s; give macake another pipe_range in macake.toml", avoid, r)
	}
	used := map[int]bool{}
	for _, p := range live.Pipes {
		used[p.Number] = true
	}
	for _, q := range live.Queues {
		used[q.Parent] = true
	}
	for n := r.First; n <= r.Last; n++ {
		if used[n] {
			continue
		}
		if first == 0 {
			first = n
			continue
		}
		if pfdntest.Bucket(n) == pfdntest.Bucket(first) {
			return first, n, nil
		}
	}
	return 0, 0, fmt.Errorf("no two free pipes in one listing bucket in the scratch range %s (other tools use %d of its pipes)", r, len(used))
}

// mirror copies into the emulator the pf state other tools hold on this
// Mac, which every answer about references depends on: their enable
// tokens (holders and order) and pf being enabled without one.
func (s *Suite) mirror(ctx context.Context) error {
	refsCmd := execrun.Command{Argv: []string{s.opts.Pfctl, "-s", "References"}}
	res, err := runChecked(ctx, s.opts.Runner, refsCmd)
	if err != nil {
		return fmt.Errorf("reading pf's references: %w", err)
	}
	refs, _, err := pfdn.ParseReferences(res.Stdout, res.Stderr)
	if err != nil {
		return fmt.Errorf("reading pf's references: %w", err)
	}
	infoCmd := execrun.Command{Argv: []string{s.opts.Pfctl, "-s", "info"}}
	if res, err = runChecked(ctx, s.opts.Runner, infoCmd); err != nil {
		return fmt.Errorf("reading pf's status: %w", err)
	}
	info, err := pfdn.ParseInfo(res.Stdout, res.Stderr)
	if err != nil {
		return fmt.Errorf("reading pf's status: %w", err)
	}
	// The listing is newest first; the emulator takes them oldest first.
	var holders []string
	for i := len(refs) - 1; i >= 0; i-- {
		s.emu.TakeReference(refs[i].PID, refs[i].Process)
		holders = append(holders, fmt.Sprintf("%s (pid %d)", refs[i].Process, refs[i].PID))
	}
	switch {
	case len(refs) > 0:
		s.setup = append(s.setup, fmt.Sprintf("mirrored into the emulator %d pf enable reference(s) held by %s", len(refs), strings.Join(holders, ", ")))
	case info.Enabled:
		if _, err := s.emu.Foreign(ctx, "", emuPfctl, "-e"); err != nil {
			return err
		}
		s.setup = append(s.setup, "pf is enabled without a reference token (someone ran pfctl -e); the emulator was enabled the same way")
	}
	return nil
}
