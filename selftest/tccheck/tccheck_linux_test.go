// SPDX-License-Identifier: Apache-2.0

package tccheck

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/selftest/check"
	"github.com/macake/macake/selftest/loopback"
	"github.com/macake/macake/selftest/scratch"
	"github.com/macake/macake/shape"
)

func requireRoot(t *testing.T) tc.Tools {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: the tc selftest creates a network namespace and needs root (CI runs as root)")
	}
	tools := tc.DefaultTools()
	if !strings.HasPrefix(tools.TC, "/") || !strings.HasPrefix(tools.IP, "/") {
		t.Skip("skipping: tc and ip (iproute2) are not installed")
	}
	return tools
}

// testNetns is this test binary's scratch namespace: not the selftest's
// own name, so that a selftest or another checkout's tests running on the
// same machine are not disturbed.
func testNetns() string { return fmt.Sprintf("%s-t%d", ScratchNetns, os.Getpid()) }

// testOptions are the options of a suite under test, as root: the real
// tools with a 30 s timeout, a fresh ledger, this binary's namespace.
func testOptions(t *testing.T) Options {
	t.Helper()
	tools := requireRoot(t)
	led, err := scratch.Open(t.TempDir(), "tc", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return Options{Runner: execrun.Exec{Timeout: 30 * time.Second}, Tools: tools, Ledger: led, Netns: testNetns()}
}

// TestSuiteOnThisKernel runs the tc selftest on the real kernel: every
// check matches, and the scratch namespace is gone afterwards.
func TestSuiteOnThisKernel(t *testing.T) {
	ctx := context.Background()
	o := testOptions(t)
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := check.Run(ctx, s.Checks(), s.Real(), s.Expected(), nil)
	cake := s.b.Capabilities(ctx).Cake
	done, errs := s.Close(ctx)
	if len(errs) > 0 || len(done) != 2 {
		t.Fatalf("cleanup: %v, %v", done, errs)
	}
	for _, r := range res {
		if r.Status != check.OK && !(r.Status == check.Skipped && r.ID == "tc.shaping" && cake) && !(r.Status == check.Skipped && r.ID == "tc.capabilities") {
			t.Errorf("%s: %s: %s (real %s, expected %s)", r.ID, r.Status, r.Detail, r.Real, r.Expected)
		}
		if r.ID == "tc.shaping" {
			t.Logf("tc.shaping: %s: real %s, expected %s", r.Status, r.Real, r.Expected)
		}
	}
	if done, errs := RemoveScratch(ctx, o.Runner, o.Tools, o.Ledger.Record()); len(done) > 0 || len(errs) > 0 {
		t.Fatalf("the namespace must be gone: %v %v", done, errs)
	}
}

// rewriting passes commands to the kernel and rewrites what matching
// reads print: a kernel (or iproute2) that reports otherwise than the
// backend's parsers expect.
type rewriting struct {
	run      execrun.Runner
	match    string
	from, to string
}

func (r rewriting) Run(ctx context.Context, cmd execrun.Command) (execrun.Result, error) {
	res, err := r.run.Run(ctx, cmd)
	if strings.Contains(strings.Join(cmd.Argv, " "), r.match) {
		res.Stdout = []byte(strings.ReplaceAll(string(res.Stdout), r.from, r.to))
	}
	return res, err
}

// TestSuiteFailsOnAMisreadKernel: when tc reports the htb class at
// another rate than the backend set, the read-back checks differ, and the
// namespace still goes.
func TestSuiteFailsOnAMisreadKernel(t *testing.T) {
	ctx := context.Background()
	o := testOptions(t)
	// The kernel shapes at the rate set; only what tc prints is rewritten,
	// so the measurement, which would pass, is left out.
	o.SkipMeasure = true
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if s.b.Capabilities(ctx).Cake {
		s.Close(ctx)
		t.Skip("skipping: this kernel shapes with cake; the rewrite targets htb's class")
	}
	s.b.Runner = rewriting{run: o.Runner, match: "class show", from: "rate 20Mbit ceil", to: "rate 19Mbit ceil"}
	res, _ := check.Run(ctx, s.Checks(), s.Real(), s.Expected(), nil)
	if _, errs := s.Close(ctx); len(errs) > 0 {
		t.Fatal(errs)
	}
	var differs []string
	for _, r := range res {
		if r.Status == check.Differs {
			differs = append(differs, r.ID)
		}
	}
	if got := strings.Join(differs, " "); got != "tc.converged tc.readback" {
		t.Errorf("differing checks %q, want tc.converged and tc.readback", got)
	}
}

// TestShapingDiffersFromAnotherRate: a shaper that holds another rate
// than the model's (here set to half behind the model's back) makes the
// measurement differ, so the check can fail.
func TestShapingDiffersFromAnotherRate(t *testing.T) {
	ctx := context.Background()
	o := testOptions(t)
	o.Measure = loopback.Config{Duration: 3 * time.Second}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if s.b.Capabilities(ctx).Cake {
		t.Skip("skipping: this kernel shapes with cake, which the measurement does not model")
	}
	if r := s.probeApply(ctx); r.Status != check.OK {
		t.Fatalf("apply: %+v", r)
	}
	l := s.desired.Links[0]
	half := l.Upload
	half.RateBits /= 2
	if err := s.b.SetRate(ctx, l, shape.Upload, half); err != nil {
		t.Fatal(err)
	}
	r := s.probeShaping(ctx)
	if r.Status != check.Differs || !strings.Contains(r.Detail, "the rate is") {
		t.Errorf("a shaper at half the model's rate: %s: %s (real %s, expected %s)", r.Status, r.Detail, r.Real, r.Expected)
	}
}

// TestRefusesAnotherSelftestsNamespace: when the scratch namespace (or
// its peer) exists and this run's record does not name it, it belongs to
// another selftest: New refuses, records nothing and leaves it.
func TestRefusesAnotherSelftestsNamespace(t *testing.T) {
	tools := requireRoot(t)
	ctx := context.Background()
	run := execrun.Exec{Timeout: 30 * time.Second}
	ns := testNetns()
	for _, other := range []string{ns, Peer(ns)} {
		t.Run(other, func(t *testing.T) {
			if _, err := run.Run(ctx, execrun.Command{Argv: []string{tools.IP, "netns", "add", other}}); err != nil {
				t.Fatal(err)
			}
			defer run.Run(ctx, execrun.Command{Argv: []string{tools.IP, "netns", "del", other}})
			led, err := scratch.Open(t.TempDir(), "tc", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if s, err := New(ctx, Options{Runner: run, Tools: tools, Ledger: led, Netns: ns}); err == nil || !strings.Contains(err.Error(), "network namespace "+other+" exists") {
				if s != nil {
					s.Close(ctx)
				}
				t.Fatalf("New: %v", err)
			}
			if rec := led.Record(); rec.Netns != "" {
				t.Errorf("the record names %q", rec.Netns)
			}
			if got, _ := namespaces(ctx, run, tools); !slices.Contains(got, other) {
				t.Error("the other selftest's namespace is gone")
			}
		})
	}
}
