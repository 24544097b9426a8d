// SPDX-License-Identifier: Apache-2.0

// Package plan holds a reconciliation plan as data: the ordered operations a
// backend must run to make the live system match the desired state. Computing
// a plan never touches the system; only a backend's Execute runs its
// commands. Text and JSON renderings are what `macake apply` prints.
package plan

import (
	"encoding/json"

	"github.com/macake/macake/diag"
	"github.com/macake/macake/execrun"
)

// Action is what an operation does to its object.
type Action string

// The three actions, printed as +, ~ and -.
const (
	Create Action = "create"
	Update Action = "update"
	Remove Action = "remove"
)

// Symbol returns the one-character plan symbol of a.
func (a Action) Symbol() string {
	switch a {
	case Create:
		return "+"
	case Update:
		return "~"
	case Remove:
		return "-"
	}
	return "?"
}

// Role is what an op's object does for shaping.
type Role string

// The roles of owned objects.
const (
	// RoleShaper is an object that shapes (a pipe, a qdisc); the zero Role.
	RoleShaper Role = ""
	// RoleRules is the rules that send traffic to the shapers.
	RoleRules Role = "rules"
	// RoleEnable is what keeps the packet filter enabled for macake (pf's
	// enable reference).
	RoleEnable Role = "enable"
)

// Field is one changed attribute of an object.
type Field struct {
	// Name is the human label, e.g. "bandwidth".
	Name string `json:"name"`
	// Before and After are the human renderings; Before is empty on create.
	Before string `json:"-"`
	After  string `json:"-"`
	// Key is the JSON key in base units, e.g. "bandwidth_bits_per_second".
	Key string `json:"key"`
	// BeforeValue and AfterValue are the JSON values, in base units.
	BeforeValue any `json:"before,omitempty"`
	AfterValue  any `json:"after,omitempty"`
	// Lines, for an attribute that is a list of lines (an anchor's rules),
	// are the lines that go ("- " and the line) and come ("+ " and the
	// line), in order, so the text plan shows what changed and not only
	// "14 rules -> 14 rules". The JSON form has the whole lists already.
	Lines []string `json:"-"`
	// Note explains the new value when it is not what the policy says,
	// e.g. a pipe rate below the policy's rate because of overhead
	// compensation (shape.Compensation).
	Note string `json:"-"`
}

// Op is one operation on one owned object.
type Op struct {
	// Link is the link the object belongs to; "" for shared objects (the
	// pf enable reference, the anchor when it holds several links).
	Link string `json:"link,omitempty"`
	// Interface is the link's interface, for the plan's group header.
	Interface string `json:"interface,omitempty"`
	// Kind names the object type: "pipe", "rules", "pf-reference",
	// "qdisc", "ifb", ...
	Kind string `json:"kind"`
	// ID identifies the object within its kind, e.g. "48001".
	ID string `json:"id"`
	// Label is the human name, e.g. `pipe 48001 "wan/upload"`.
	Label string `json:"label"`
	// Action is create, update or remove.
	Action Action `json:"action"`
	// Role is what the object does, whatever the backend calls it; watch
	// names the drift it repairs by it. "" is a shaper.
	Role Role `json:"-"`
	// Fields lists the changed attributes (all of them on create).
	Fields []Field `json:"fields,omitempty"`
	// Unchanged counts the attributes that stay as they are (hidden).
	Unchanged int `json:"unchanged,omitempty"`
	// Reason says why, e.g. "bandwidth differs" or "interface en0 is down".
	Reason string `json:"reason,omitempty"`
	// Commands are the exact child invocations, in order.
	Commands []execrun.Command `json:"commands"`
}

// Warning is a finding that does not stop the plan, e.g. a dummynet
// limitation or a foreign pipe in the owned range. Its JSON form is the one
// error schema (diag: message and link) with unshaped beside it.
type Warning struct {
	Link    string `json:"link,omitempty"`
	Message string `json:"message"`
	// Unshaped names the directions ("upload", "download") of Link that
	// the finding leaves unshaped, e.g. because another tool's qdisc is in
	// the way; empty when shaping is in effect regardless. A plan with such
	// a warning does not make the live state match the policy even when it
	// has no ops.
	Unshaped []string `json:"unshaped,omitempty"`
}

// Diagnostic is the warning in the one error schema.
func (w Warning) Diagnostic() diag.Diagnostic {
	return diag.Diagnostic{Message: w.Message, Link: w.Link}
}

// Diagnostics returns the Diagnostic of every warning of p.
func (p Plan) Diagnostics() []diag.Diagnostic {
	out := make([]diag.Diagnostic, 0, len(p.Warnings))
	for _, w := range p.Warnings {
		out = append(out, w.Diagnostic())
	}
	return out
}

// MarshalJSON writes the warning as a diag.Diagnostic with unshaped.
func (w Warning) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		diag.Diagnostic
		Unshaped []string `json:"unshaped,omitempty"`
	}{w.Diagnostic(), w.Unshaped})
}

// Unshaped returns the warnings that leave a direction of a link
// unshaped.
func (p Plan) Unshaped() []Warning {
	var out []Warning
	for _, w := range p.Warnings {
		if len(w.Unshaped) > 0 {
			out = append(out, w)
		}
	}
	return out
}

// Plan is an ordered list of operations. The order is safe to execute:
// pipes exist before rules that name them, rules are gone before the pipes
// they name are deleted.
type Plan struct {
	Ops      []Op      `json:"changes"`
	Warnings []Warning `json:"warnings"`
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return len(p.Ops) == 0 }

// Commands returns how many commands the plan runs, all ops together:
// the steps a failure or a kill can stop it at.
func (p Plan) Commands() int {
	n := 0
	for _, op := range p.Ops {
		n += len(op.Commands)
	}
	return n
}

// Count returns how many operations create, update and remove.
func (p Plan) Count() (create, update, remove int) {
	for _, op := range p.Ops {
		switch op.Action {
		case Create:
			create++
		case Update:
			update++
		case Remove:
			remove++
		}
	}
	return
}
