// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/macake/macake/diag"
	"github.com/macake/macake/execrun"
)

// TextOptions controls the human rendering of a plan.
type TextOptions struct {
	// Color adds ANSI colours (+ green, ~ yellow, - red, headers bold).
	// The symbols carry the meaning without it.
	Color bool
	// ShowCommands prints each op's exact commands under it.
	ShowCommands bool
	// DryRun prefixes shown commands with "would run:" instead of "run:".
	DryRun bool
	// Subject completes the "No changes." line, e.g.
	// "Live pf/dummynet state matches /etc/macake/links.d."
	Subject string
	// Symbols prints the legend line before the ops.
	Symbols bool
	// SharedGroup titles the block of ops that belong to no single link,
	// e.g. "pf" for the pf enable reference; "shared objects" when empty.
	SharedGroup string
	// NoChanges, when set, replaces the whole "No changes. SUBJECT" line
	// of an empty plan, for when nothing to change is not good news.
	NoChanges string
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
)

func (o TextOptions) paint(code, s string) string {
	if !o.Color {
		return s
	}
	return code + s + ansiReset
}

func (o TextOptions) symbol(a Action) string {
	switch a {
	case Create:
		return o.paint(ansiGreen, "+")
	case Update:
		return o.paint(ansiYellow, "~")
	case Remove:
		return o.paint(ansiRed, "-")
	}
	return "?"
}

// line paints one of a field's changed lines by its leading - or +.
func (o TextOptions) line(l string) string {
	switch {
	case strings.HasPrefix(l, "- "):
		return o.paint(ansiRed, l)
	case strings.HasPrefix(l, "+ "):
		return o.paint(ansiGreen, l)
	}
	return l
}

// group is a run of consecutive ops of one link, in plan order.
type group struct {
	link, iface string
	ops         []Op
}

// groups splits the plan into per-link blocks, keeping first-appearance
// order so the printed order is the execution order as far as possible.
func (p Plan) groups() []group {
	var gs []group
	index := map[string]int{}
	for _, op := range p.Ops {
		i, ok := index[op.Link]
		if !ok {
			i = len(gs)
			index[op.Link] = i
			gs = append(gs, group{link: op.Link, iface: op.Interface})
		}
		if gs[i].iface == "" {
			gs[i].iface = op.Interface
		}
		gs[i].ops = append(gs[i].ops, op)
	}
	return gs
}

// UnshapedSummary names what unshaped warnings leave unshaped, e.g.
// `link "wan" upload` or `link "wan" upload and download, link "lte"
// download`.
func UnshapedSummary(ws []Warning) string {
	var order []string
	dirs := map[string][]string{}
	for _, w := range ws {
		if _, seen := dirs[w.Link]; !seen {
			order = append(order, w.Link)
			dirs[w.Link] = nil
		}
		for _, d := range w.Unshaped {
			if !slices.Contains(dirs[w.Link], d) {
				dirs[w.Link] = append(dirs[w.Link], d)
			}
		}
	}
	parts := make([]string, 0, len(order))
	for _, l := range order {
		ds := dirs[l]
		slices.Sort(ds)
		slices.Reverse(ds) // upload before download
		what := strings.Join(ds, " and ")
		if l == "" {
			parts = append(parts, what)
		} else {
			parts = append(parts, fmt.Sprintf("link %q %s", l, what))
		}
	}
	return strings.Join(parts, ", ")
}

// WriteText renders p for people: a legend, one block per link, hidden
// unchanged fields counted, and the summary line; exactly "No changes."
// (followed by opts.Subject) when there is nothing to do.
func WriteText(w io.Writer, p Plan, opts TextOptions) error {
	var b strings.Builder
	for _, wn := range p.Warnings {
		if wn.Link != "" {
			fmt.Fprintf(&b, "Warning: link %q: %s\n", wn.Link, wn.Message)
		} else {
			fmt.Fprintf(&b, "Warning: %s\n", wn.Message)
		}
	}
	if len(p.Warnings) > 0 {
		b.WriteByte('\n')
	}
	if p.Empty() {
		un := p.Unshaped()
		switch {
		case opts.NoChanges != "":
			b.WriteString(opts.NoChanges)
		case len(un) > 0:
			// "matches" would be false: the live state is all macake can
			// make it, and still not what the policy asks for.
			fmt.Fprintf(&b, "No changes macake can make, but the live shaping does not match the policy: %s not shaped (see the warnings above).", UnshapedSummary(un))
		case opts.Subject != "":
			b.WriteString("No changes. " + opts.Subject)
		default:
			b.WriteString("No changes.")
		}
		b.WriteByte('\n')
		_, err := io.WriteString(w, b.String())
		return err
	}
	if opts.Symbols {
		fmt.Fprintf(&b, "Symbols:  %s create   %s update in place   %s remove\n\n",
			opts.symbol(Create), opts.symbol(Update), opts.symbol(Remove))
	}
	labelWidth := 0
	for _, op := range p.Ops {
		for _, f := range op.Fields {
			labelWidth = max(labelWidth, len(f.Name))
		}
	}
	for _, g := range p.groups() {
		b.WriteString("  " + opts.paint(ansiBold, g.header(opts.SharedGroup)) + "\n")
		for _, op := range g.ops {
			fmt.Fprintf(&b, "  %s %s\n", opts.symbol(op.Action), op.Label)
			if op.explainsItself() {
				fmt.Fprintf(&b, "      # %s\n", op.Reason)
			}
			for _, f := range op.Fields {
				switch op.Action {
				case Update:
					fmt.Fprintf(&b, "      %s %-*s  %s -> %s\n", opts.symbol(Update), labelWidth, f.Name, f.Before, f.After)
					for _, line := range f.Lines {
						b.WriteString("          " + opts.line(line) + "\n")
					}
				case Create:
					fmt.Fprintf(&b, "      %s %-*s  %s\n", opts.symbol(Create), labelWidth, f.Name, f.After)
				}
				if f.Note != "" && op.Action != Remove {
					fmt.Fprintf(&b, "          # %s\n", f.Note)
				}
			}
			if op.Unchanged > 0 {
				noun := "fields"
				if op.Unchanged == 1 {
					noun = "field"
				}
				fmt.Fprintf(&b, "        # (%d unchanged %s hidden)\n", op.Unchanged, noun)
			}
			if opts.ShowCommands {
				for _, c := range op.Commands {
					b.WriteString(display(c, "      "+commandPrefix(opts.DryRun)) + "\n")
				}
			}
		}
		b.WriteByte('\n')
	}
	c, u, r := p.Count()
	fmt.Fprintf(&b, "Plan: %d to create, %d to update, %d to remove.\n", c, u, r)
	_, err := io.WriteString(w, b.String())
	return err
}

// explainsItself reports whether op's reason is shown under its label:
// when the op runs nothing (it only updates macake's records), and when an object
// replaces one of another kind (a qdisc someone else put in macake's
// place), where the reason says what was found. Elsewhere the fields say
// it and the reason would repeat them.
func (op Op) explainsItself() bool {
	if op.Reason == "" {
		return false
	}
	return len(op.Commands) == 0 || (op.Action == Update && len(op.Fields) > 0 && op.Fields[0].Key == "qdisc")
}

func commandPrefix(dryRun bool) string {
	if dryRun {
		return "would run: "
	}
	return "run: "
}

// header is the block title: `# link "wan" (en0): 1 change`, or the shared
// reason when every op of the link has the same one (e.g. "removed from
// config").
func (g group) header(shared string) string {
	name := shared
	if name == "" {
		name = "shared objects"
	}
	if g.link != "" {
		name = fmt.Sprintf("link %q", g.link)
		if g.iface != "" {
			name += fmt.Sprintf(" (%s)", g.iface)
		}
	}
	reason := g.ops[0].Reason
	for _, op := range g.ops[1:] {
		if op.Reason != reason {
			reason = ""
			break
		}
	}
	// A shared reason titles the block only when the whole link goes away
	// ("removed from config"); for creates and updates the count says more
	// than a repeated "not present".
	allRemoved := true
	for _, op := range g.ops {
		allRemoved = allRemoved && op.Action == Remove
	}
	if reason != "" && len(g.ops) > 1 && allRemoved {
		return fmt.Sprintf("# %s: %s", name, reason)
	}
	if len(g.ops) > 1 {
		reason = ""
	}
	n := len(g.ops)
	noun := "changes"
	if n == 1 {
		noun = "change"
	}
	if reason != "" {
		return fmt.Sprintf("# %s: %d %s (%s)", name, n, noun, reason)
	}
	return fmt.Sprintf("# %s: %d %s", name, n, noun)
}

// display renders the command with prefix; a command with stdin is shown as
// a here-document, so the exact input is visible.
func display(c execrun.Command, prefix string) string {
	if c.Stdin == "" {
		return prefix + c.String()
	}
	indent := strings.Repeat(" ", len(prefix)-len(strings.TrimLeft(prefix, " ")))
	var b strings.Builder
	b.WriteString(prefix + c.String() + " <<'EOF'\n")
	for _, line := range strings.Split(strings.TrimSuffix(c.Stdin, "\n"), "\n") {
		b.WriteString(indent + "  " + line + "\n")
	}
	b.WriteString(indent + "  EOF")
	return b.String()
}

// JSONFormatVersion is the plan document's format version. Consumers
// ignore unknown fields when the minor version rises and reject an unknown
// major version. 1.1 added live_state_not_read and note; 2.0 made errors
// objects of the one error schema (package diag: message, and file, line,
// column and link when known) instead of strings, and added
// changes[].notes.
const JSONFormatVersion = "2.0"

// JSONDocument is the versioned JSON form of a plan, as printed by
// `macake apply --json`.
type JSONDocument struct {
	FormatVersion string       `json:"format_version"`
	DryRun        bool         `json:"dry_run"`
	Applied       bool         `json:"applied"`
	Summary       JSONSummary  `json:"summary"`
	Changes       []JSONChange `json:"changes"`
	Warnings      []Warning    `json:"warnings"`
	// Errors are the errors met, in the one error schema (diag).
	Errors []diag.Diagnostic `json:"errors"`
	// LiveStateNotRead is set when the live state could not be read (a
	// dry run without root on macOS): Changes are then everything macake
	// would own, not the difference from what is live.
	LiveStateNotRead bool `json:"live_state_not_read,omitempty"`
	// Note explains the document in a sentence when it needs one.
	Note string `json:"note,omitempty"`
}

// JSONSummary counts the changes by action.
type JSONSummary struct {
	Create int `json:"create"`
	Update int `json:"update"`
	Remove int `json:"remove"`
}

// JSONChange is one op with its before/after values in base units.
type JSONChange struct {
	Link   string         `json:"link,omitempty"`
	Kind   string         `json:"kind"`
	ID     string         `json:"id"`
	Action Action         `json:"action"`
	Before map[string]any `json:"before,omitempty"`
	After  map[string]any `json:"after,omitempty"`
	Reason string         `json:"reason,omitempty"`
	// Notes explain values of After, by key, when they are not what the
	// policy says (e.g. overhead compensation of a pipe rate).
	Notes    map[string]string `json:"notes,omitempty"`
	Commands []execrun.Command `json:"commands"`
}

// Document builds the JSON form of p. errs are errors met while applying.
func Document(p Plan, dryRun, applied bool, errs []error) JSONDocument {
	c, u, r := p.Count()
	doc := JSONDocument{
		FormatVersion: JSONFormatVersion, DryRun: dryRun, Applied: applied,
		Summary:  JSONSummary{Create: c, Update: u, Remove: r},
		Changes:  []JSONChange{},
		Warnings: append([]Warning{}, p.Warnings...),
		Errors:   diag.List(errs),
	}
	for _, op := range p.Ops {
		ch := JSONChange{Link: op.Link, Kind: op.Kind, ID: op.ID, Action: op.Action, Reason: op.Reason, Commands: op.Commands}
		if ch.Commands == nil {
			ch.Commands = []execrun.Command{}
		}
		for _, f := range op.Fields {
			if f.Key == "" {
				continue
			}
			if op.Action == Update && f.BeforeValue != nil {
				if ch.Before == nil {
					ch.Before = map[string]any{}
				}
				ch.Before[f.Key] = f.BeforeValue
			}
			if op.Action != Remove && f.AfterValue != nil {
				if ch.After == nil {
					ch.After = map[string]any{}
				}
				ch.After[f.Key] = f.AfterValue
				if f.Note != "" {
					if ch.Notes == nil {
						ch.Notes = map[string]string{}
					}
					ch.Notes[f.Key] = f.Note
				}
			}
		}
		doc.Changes = append(doc.Changes, ch)
	}
	return doc
}

// WriteJSON writes Document(p, dryRun, applied, errs) as one indented JSON
// document followed by a newline.
func WriteJSON(w io.Writer, p Plan, dryRun, applied bool, errs []error) error {
	return WriteDocument(w, Document(p, dryRun, applied, errs))
}

// WriteDocument writes doc as one indented JSON document followed by a
// newline.
func WriteDocument(w io.Writer, doc JSONDocument) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
