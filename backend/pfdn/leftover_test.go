// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/macake/macake/shape"
)

// TestLeftoverPipeFixIsTheOneDeleteSyntax: the plan's warning about a pipe
// in macake's range that macake does not own names the command that
// removes it, in the one syntax the docs give (`dnctl pipe delete N`;
// reference/pf-dummynet.md, rule 4), and running that command removes the
// pipe, after which the plan has nothing left to warn about.
func TestLeftoverPipeFixIsTheOneDeleteSyntax(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	foreignRun(ctx, t, h.e, "", "/usr/sbin/dnctl", "pipe", "48011", "config", "bw", "5Mbit/s", "queue", "32Kbytes")
	p, err := h.b.Plan(ctx, shape.State{})
	if err != nil {
		t.Fatal(err)
	}
	fix := regexp.MustCompile(`sudo (dnctl [^;]*);`)
	var cmd string
	for _, w := range p.Warnings {
		if m := fix.FindStringSubmatch(w.Message); m != nil {
			cmd = m[1]
		}
	}
	if cmd != "dnctl pipe delete 48011" {
		t.Fatalf("the warning's fix is %q, want \"dnctl pipe delete 48011\"; warnings: %+v", cmd, p.Warnings)
	}
	foreignRun(ctx, t, h.e, "", append([]string{"/usr/sbin/dnctl"}, strings.Fields(cmd)[1:]...)...)
	if _, ok := h.e.Snapshot().Pipes[48011]; ok {
		t.Fatalf("%s left the pipe in place", cmd)
	}
	if p, err := h.b.Plan(ctx, shape.State{}); err != nil || len(p.Warnings) != 0 {
		t.Errorf("after the fix: warnings %+v, %v", p.Warnings, err)
	}
}
