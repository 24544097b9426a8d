// SPDX-License-Identifier: Apache-2.0

//go:build linux

package tc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

var errKilled = errors.New("signal: killed")

// killingRunner is macake killed in the middle of an apply: it carries
// out the first `after` lines the apply writes (a batch's lines one by
// one, a lone command as one line), then dies. The line in hand when it
// dies never runs, and nothing runs after it. Reads pass through until
// the kill.
type killingRunner struct {
	inner  execrun.Runner
	after  int
	mu     sync.Mutex
	done   int
	killed bool
}

func (r *killingRunner) dead() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.killed
}

func (r *killingRunner) Run(ctx context.Context, cmd execrun.Command) (execrun.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.killed {
		return execrun.Result{}, errKilled
	}
	a := strings.Join(cmd.Argv, " ")
	if strings.Contains(a, " show") || strings.HasSuffix(cmd.Argv[0], "unshare") {
		return r.inner.Run(ctx, cmd)
	}
	var lines []string
	if cmd.Stdin != "" {
		lines = strings.Split(strings.TrimSuffix(cmd.Stdin, "\n"), "\n")
	} else {
		lines = []string{a}
	}
	if r.done+len(lines) <= r.after {
		r.done += len(lines)
		return r.inner.Run(ctx, cmd)
	}
	keep := r.after - r.done
	r.killed = true
	if keep > 0 { // a batch dies in the middle
		part := cmd
		part.Stdin = strings.Join(lines[:keep], "\n") + "\n"
		if _, err := r.inner.Run(ctx, part); err != nil {
			return execrun.Result{}, err
		}
	}
	return execrun.Result{ExitCode: -1}, errKilled
}

// killableOwnership is the state file of the process killingRunner
// kills: what it records before the kill is kept, nothing after.
type killableOwnership struct {
	*MemoryOwnership
	r *killingRunner
}

func (o killableOwnership) SetRootOwned(dev string, owned bool) error {
	if o.r.dead() {
		return errKilled
	}
	return o.MemoryOwnership.SetRootOwned(dev, owned)
}

func (o killableOwnership) SetHookOwned(dev string, owned bool) error {
	if o.r.dead() {
		return errKilled
	}
	return o.MemoryOwnership.SetHookOwned(dev, owned)
}

// TestKernelKilledApplyConverges kills `apply` (the plan run as one ip
// batch and one tc batch) after each line it writes in turn, so that every
// gap between two kernel changes is a crash point. The next process,
// reading the state the killed one left, converges (and No changes
// after), shapes as asked, and its down leaves the namespace as macake
// found it: no object, no ingress qdisc, no IFB left behind.
func TestKernelKilledApplyConverges(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		ns := kernelNetns(t, "wan0")
		initial := kernelState(t, ns) + sh(t, "ip", "-n", ns, "-o", "link", "show")
		desired := shape.State{Links: []shape.Link{wanLink("wan0", 1)}}
		ctx := context.Background()
		counting := ks.backend(t, ns, execrun.Exec{})
		p, err := counting.Plan(ctx, desired)
		if err != nil {
			t.Fatal(err)
		}
		lines := p.Commands()
		for after := 0; after < lines; after++ {
			t.Run(fmt.Sprintf("kill-after-%d-of-%d", after, lines), func(t *testing.T) {
				store := &MemoryOwnership{}
				kill := &killingRunner{inner: execrun.Exec{}, after: after}
				b := ks.backend(t, ns, kill)
				b.Owners, b.Netlink = killableOwnership{store, kill}, NewNetlink(ns)
				defer b.Netlink.Close()
				p, err := b.Plan(ctx, desired)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.ExecuteBatch(ctx, p.Ops, nil); !errors.Is(err, errKilled) {
					t.Fatalf("the apply killed after %d lines returned %v", after, err)
				}
				// The next process: the state file the killed one left.
				next := ks.backend(t, ns, execrun.Exec{})
				next.Owners, next.Netlink = store, NewNetlink(ns)
				defer next.Netlink.Close()
				apply(t, next, desired)
				mustConverge(t, next, desired)
				assertShaper(t, next, ks, "wan0", 20_000_000, 64<<10)
				assertShaper(t, next, ks, "ifb-macake1", 30_123_456, 128<<10)
				apply(t, next, shape.State{})
				assertNothingOwned(t, next)
				if now := kernelState(t, ns) + sh(t, "ip", "-n", ns, "-o", "link", "show"); now != initial {
					t.Fatalf("after the kill, an apply and down, the namespace is not as macake found it:\nbefore:\n%s\nafter:\n%s", initial, now)
				}
			})
		}
	})
}
