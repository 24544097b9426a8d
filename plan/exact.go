// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/macake/macake/execrun"
)

// The JSON document `apply --json` prints is for people and scripts: it
// leaves out what only the text rendering needs (the human Before/After
// of a field, its changed lines, an op's role). A plan saved to be applied
// later (`macake plan -out FILE`) must come back exactly as it was made,
// to be shown and executed as reviewed: EncodeExact and DecodeExact are
// that form.

// exactField is Field with every member.
type exactField struct {
	Name        string   `json:"name"`
	Before      string   `json:"before_text,omitempty"`
	After       string   `json:"after_text,omitempty"`
	Key         string   `json:"key"`
	BeforeValue any      `json:"before,omitempty"`
	AfterValue  any      `json:"after,omitempty"`
	Lines       []string `json:"lines,omitempty"`
	Note        string   `json:"note,omitempty"`
}

// exactOp is Op with every member.
type exactOp struct {
	Link      string            `json:"link,omitempty"`
	Interface string            `json:"interface,omitempty"`
	Kind      string            `json:"kind"`
	ID        string            `json:"id"`
	Label     string            `json:"label"`
	Action    Action            `json:"action"`
	Role      Role              `json:"role,omitempty"`
	Fields    []exactField      `json:"fields,omitempty"`
	Unchanged int               `json:"unchanged,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	Commands  []execrun.Command `json:"commands"`
}

type exactPlan struct {
	Ops      []exactOp `json:"changes"`
	Warnings []Warning `json:"warnings"`
}

// EncodeExact returns p as JSON that DecodeExact turns back into the same
// plan: the same ops, labels, fields (with their human renderings),
// reasons, commands and warnings. Equal plans encode to equal bytes.
func EncodeExact(p Plan) ([]byte, error) {
	e := exactPlan{Ops: make([]exactOp, 0, len(p.Ops)), Warnings: p.Warnings}
	if e.Warnings == nil {
		e.Warnings = []Warning{}
	}
	for _, op := range p.Ops {
		x := exactOp{Link: op.Link, Interface: op.Interface, Kind: op.Kind, ID: op.ID, Label: op.Label,
			Action: op.Action, Role: op.Role, Unchanged: op.Unchanged, Reason: op.Reason, Commands: op.Commands}
		for _, f := range op.Fields {
			x.Fields = append(x.Fields, exactField(f))
		}
		e.Ops = append(e.Ops, x)
	}
	return json.Marshal(e)
}

// DecodeExact reads what EncodeExact wrote. A value of a field (before,
// after) comes back as JSON decodes it (numbers as float64), which
// renders the same.
func DecodeExact(b []byte) (Plan, error) {
	var e exactPlan
	if err := json.Unmarshal(b, &e); err != nil {
		return Plan{}, err
	}
	p := Plan{Ops: make([]Op, 0, len(e.Ops)), Warnings: e.Warnings}
	if p.Warnings == nil {
		p.Warnings = []Warning{}
	}
	for i, x := range e.Ops {
		switch x.Action {
		case Create, Update, Remove:
		default:
			return Plan{}, fmt.Errorf("change %d (%s): unknown action %q", i+1, x.Label, x.Action)
		}
		op := Op{Link: x.Link, Interface: x.Interface, Kind: x.Kind, ID: x.ID, Label: x.Label,
			Action: x.Action, Role: x.Role, Unchanged: x.Unchanged, Reason: x.Reason, Commands: x.Commands}
		for _, f := range x.Fields {
			op.Fields = append(op.Fields, Field(f))
		}
		p.Ops = append(p.Ops, op)
	}
	return p, nil
}

// Summary is an op in one line, for saying how two plans differ:
// `~ pipe 48002 "home/download": bandwidth 80 Mbit/s -> 100 Mbit/s`.
func (op Op) Summary() string {
	var fields []string
	for _, f := range op.Fields {
		switch {
		case f.Before == "" && f.After == "":
			fields = append(fields, f.Name)
		case f.Before == "":
			fields = append(fields, f.Name+" "+f.After)
		case f.After == "":
			fields = append(fields, f.Name+" "+f.Before+" -> none")
		default:
			fields = append(fields, f.Name+" "+f.Before+" -> "+f.After)
		}
	}
	s := op.Action.Symbol() + " " + op.Label
	if len(fields) > 0 {
		s += ": " + strings.Join(fields, ", ")
	}
	return s
}

// OnlyLink keeps the ops of p that belong to link, and those shared ops
// keep (nil: none) says a plan for link alone needs, and the warnings
// about link or about no link in particular.
func (p Plan) OnlyLink(link string, keep func(Op) bool) Plan {
	out := Plan{Ops: []Op{}, Warnings: []Warning{}}
	for _, op := range p.Ops {
		if op.Link == link || keep != nil && keep(op) {
			out.Ops = append(out.Ops, op)
		}
	}
	for _, w := range p.Warnings {
		if w.Link == "" || w.Link == link {
			out.Warnings = append(out.Warnings, w)
		}
	}
	return out
}
