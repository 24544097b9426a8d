// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"strings"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
)

func batchOps(t Tools) []plan.Op {
	return []plan.Op{
		{Label: "a", Kind: KindShaper, ID: "a0", Action: plan.Create, Commands: []execrun.Command{t.tcCmd("qdisc", "add", "dev", "a0", "root", "handle", "4d4b:", "htb"), t.tcCmd("class", "add", "dev", "a0")}},
		{Label: "b", Kind: "ifb", ID: "ifb-macake0", Action: plan.Create, Commands: []execrun.Command{t.ipCmd("link", "add", "ifb-macake0", "type", "ifb"), t.ipCmd("link", "set", "ifb-macake0", "up")}},
		{Label: "c", Kind: KindShaper, ID: "ifb-macake0", Action: plan.Create, Commands: []execrun.Command{t.tcCmd("qdisc", "add", "dev", "ifb-macake0", "root", "handle", "4d4b:", "htb")}},
		{Label: "d", Kind: "redirect", ID: "a0", Action: plan.Create, Commands: []execrun.Command{t.tcCmd("filter", "add", "dev", "a0", "ingress")}},
	}
}

// runBatch runs ops through ExecuteBatch and returns the labels of the
// ops it reported done, in order, and the error.
func runBatch(b *Backend, ops []plan.Op) ([]string, error) {
	var done []string
	err := b.ExecuteBatch(context.Background(), ops, func(i int, err error) {
		if err == nil {
			done = append(done, ops[i].Label)
		}
	})
	return done, err
}

// A plan runs as one ip batch for the IFBs it creates, then one tc batch,
// the tc lines in the plan's order.
func TestExecuteBatchMakesIFBsFirstThenOneTCBatch(t *testing.T) {
	r := &replayRunner{okByDefault: true}
	b := &Backend{Runner: r, Tools: Tools{TC: "tc", IP: "ip"}}
	done, err := runBatch(b, batchOps(b.Tools))
	if err != nil || strings.Join(done, " ") != "b a c d" {
		t.Fatalf("ExecuteBatch did %v, %v; want b a c d", done, err)
	}
	want := []string{
		"ip -batch - <<< link add ifb-macake0 type ifb \\n link set ifb-macake0 up",
		"tc -batch - <<< qdisc add dev a0 root handle 4d4b: htb \\n class add dev a0 \\n qdisc add dev ifb-macake0 root handle 4d4b: htb \\n filter add dev a0 ingress",
	}
	if got := r.commands(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ran:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An IFB that another op of the plan also touches (removed, then made
// again) keeps its place in the plan's order.
func TestExecuteBatchKeepsTheOrderOfAnIFBTouchedTwice(t *testing.T) {
	r := &replayRunner{okByDefault: true}
	b := &Backend{Runner: r, Tools: Tools{TC: "tc", IP: "ip"}}
	ops := batchOps(b.Tools)
	ops = append([]plan.Op{{Label: "gone", Kind: "ifb", ID: "ifb-macake0", Action: plan.Remove,
		Commands: []execrun.Command{b.Tools.ipCmd("link", "del", "ifb-macake0")}}}, ops...)
	done, err := runBatch(b, ops)
	if err != nil || strings.Join(done, " ") != "gone a b c d" {
		t.Fatalf("ExecuteBatch did %v, %v; want the plan's order", done, err)
	}
}

// The line tc names in "Command failed -:N" tells which op failed; the
// ops before it are done, the ones after are not reported.
func TestExecuteBatchNamesTheFailedOp(t *testing.T) {
	for _, c := range []struct {
		stderr   string
		wantDone string
		failed   string
	}{
		{"Command failed -:1\n", "b", "a"},
		{"Command failed -:2\n", "b", "a"},
		{"Command failed -:3\n", "b a", "c"},
		{"Command failed -:4\n", "b a c", "d"},
		// No line named (killed, timed out): the first op of the batch.
		{"", "b", "a"},
	} {
		r := &replayRunner{okByDefault: true, answers: map[string]execrun.Result{
			"tc -batch -": {ExitCode: 1, Stderr: []byte("Error: injected.\n" + c.stderr)},
		}}
		b := &Backend{Runner: r, Tools: Tools{TC: "tc", IP: "ip"}}
		ops := batchOps(b.Tools)
		var failed string
		var done []string
		err := b.ExecuteBatch(context.Background(), ops, func(i int, err error) {
			if err != nil {
				failed = ops[i].Label
			} else {
				done = append(done, ops[i].Label)
			}
		})
		if strings.Join(done, " ") != c.wantDone || failed != c.failed || err == nil ||
			!strings.Contains(err.Error(), "create "+c.failed+":") || !strings.Contains(err.Error(), "injected") {
			t.Errorf("%q: done %v, failed %q, err %v; want done %s, %s failed and named with the stderr", c.stderr, done, failed, err, c.wantDone, c.failed)
		}
	}
}

// A command that a batch line cannot carry (an argument with a blank)
// runs on its own, in order.
func TestExecuteBatchRunsOddCommandsAlone(t *testing.T) {
	r := &replayRunner{okByDefault: true}
	b := &Backend{Runner: r, Tools: Tools{TC: "tc", IP: "ip"}}
	ops := []plan.Op{
		{Label: "a", Commands: []execrun.Command{b.Tools.tcCmd("qdisc", "show"), b.Tools.tcCmd("qdisc", "show", "dev", "a b")}},
		{Label: "b", Commands: []execrun.Command{b.Tools.tcCmd("class", "show")}},
	}
	if done, err := runBatch(b, ops); err != nil || len(done) != 2 {
		t.Fatalf("ExecuteBatch = %v, %v", done, err)
	}
	if got := strings.Join(r.commands(), "\n"); got != "tc qdisc show\ntc qdisc show dev a b\ntc class show" {
		t.Errorf("ran:\n%s", got)
	}
}
