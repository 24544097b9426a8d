// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"fmt"
	"strings"

	"github.com/macake/macake/plan"
)

// formatPlan renders a plan for golden files and failure messages: every
// op with its fields, reason and exact commands, then the warnings.
func formatPlan(p plan.Plan) string {
	var b strings.Builder
	for _, op := range p.Ops {
		fmt.Fprintf(&b, "%s %s [%s %s]", op.Action.Symbol(), op.Label, op.Kind, op.ID)
		if op.Link != "" {
			fmt.Fprintf(&b, " link=%s", op.Link)
		}
		if op.Reason != "" {
			fmt.Fprintf(&b, " (%s)", op.Reason)
		}
		b.WriteString("\n")
		for _, f := range op.Fields {
			switch {
			case f.Before == "":
				fmt.Fprintf(&b, "    %s: %s\n", f.Name, f.After)
			case f.After == "":
				fmt.Fprintf(&b, "    %s: %s → (none)\n", f.Name, f.Before)
			default:
				fmt.Fprintf(&b, "    %s: %s → %s\n", f.Name, f.Before, f.After)
			}
		}
		if op.Unchanged > 0 {
			fmt.Fprintf(&b, "    (%d unchanged)\n", op.Unchanged)
		}
		for _, c := range op.Commands {
			fmt.Fprintf(&b, "    $ %s\n", strings.Join(c.Argv, " "))
			for _, line := range strings.SplitAfter(strings.TrimSuffix(c.Stdin, "\n"), "\n") {
				if line != "" {
					fmt.Fprintf(&b, "    < %s\n", strings.TrimSuffix(line, "\n"))
				}
			}
		}
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "warning: link=%s", w.Link)
		if len(w.Unshaped) > 0 {
			fmt.Fprintf(&b, " unshaped=%s", strings.Join(w.Unshaped, ","))
		}
		fmt.Fprintf(&b, ": %s\n", w.Message)
	}
	if p.Empty() && len(p.Warnings) == 0 {
		b.WriteString("No changes.\n")
	}
	return b.String()
}
