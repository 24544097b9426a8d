// SPDX-License-Identifier: Apache-2.0

package check

import (
	"fmt"
	"slices"
	"strings"
)

// DocMismatches compares a Markdown document's table of checks with the
// checks themselves, so the page that tells users what the selftest
// verifies cannot drift from the code. A row is "| `ID` | fact | ref |"
// whose ID starts with prefix and contains a dot; each check needs one
// row carrying its Ref, and each row a check. It returns one line per
// mismatch, sorted; none means the table is true.
func DocMismatches(doc, name, prefix string, checks []Check) []string {
	rows := map[string]string{}
	for _, l := range strings.Split(doc, "\n") {
		f := strings.Split(l, "|")
		if len(f) != 5 {
			continue
		}
		cell := strings.TrimSpace(f[1])
		id := strings.Trim(cell, "`")
		if strings.HasPrefix(cell, "`"+prefix) && strings.Contains(id, ".") && !strings.Contains(id, " ") {
			rows[id] = strings.TrimSpace(f[3])
		}
	}
	var out []string
	for _, c := range checks {
		ref, ok := rows[c.ID]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s lacks a row for %s", name, c.ID))
		case ref != c.Ref:
			out = append(out, fmt.Sprintf("%s gives %s the reference %q, the check %q", name, c.ID, ref, c.Ref))
		}
		delete(rows, c.ID)
	}
	for id := range rows {
		out = append(out, fmt.Sprintf("%s lists %s, which is no check", name, id))
	}
	slices.Sort(out)
	return out
}
