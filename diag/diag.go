// SPDX-License-Identifier: Apache-2.0

// Package diag is the one JSON form of an error or a warning, shared by
// every document macake prints (validate, links, plan and apply, down,
// status, the service commands): docs/OPERATIONS.md describes it. A
// document may add fields of its own beside these (a warning's
// "unshaped", a config error's "kept"), never rename or drop them.
package diag

import (
	"errors"
	"fmt"
)

// Diagnostic is one error or warning. Message is always set; File, Line
// and Column when it is about a place in a file (Line and Column are
// 1-based, and absent when it is about the file as a whole); Link when it
// is about one link.
type Diagnostic struct {
	Message string `json:"message"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Link    string `json:"link,omitempty"`
}

// String is the diagnostic for a person: "FILE:LINE:COL: message",
// "FILE: message" for a whole file, "LINK: message" for a link, or the
// message alone.
func (d Diagnostic) String() string {
	switch {
	case d.File != "" && d.Line > 0:
		return fmt.Sprintf("%s:%d:%d: %s", d.File, d.Line, max(d.Column, 1), d.Message)
	case d.File != "":
		return d.File + ": " + d.Message
	case d.Link != "":
		return d.Link + ": " + d.Message
	}
	return d.Message
}

// Diagnoser is an error that knows its Diagnostic (a config problem knows
// its position).
type Diagnoser interface {
	Diagnostic() Diagnostic
}

// Of returns err's Diagnostic: the one of the first error in its chain that
// is a Diagnoser, else err's text as the message. Of(nil) is the zero
// Diagnostic.
func Of(err error) Diagnostic {
	if err == nil {
		return Diagnostic{}
	}
	var d Diagnoser
	if errors.As(err, &d) {
		return d.Diagnostic()
	}
	return Diagnostic{Message: err.Error()}
}

// OfPtr is Of for an optional field: nil for a nil err.
func OfPtr(err error) *Diagnostic {
	if err == nil {
		return nil
	}
	d := Of(err)
	return &d
}

// Text is a Diagnostic of msg alone, for an optional field: nil for "".
func Text(msg string) *Diagnostic {
	if msg == "" {
		return nil
	}
	return &Diagnostic{Message: msg}
}

// List returns the Diagnostic of every error, never nil, so that a
// document has [] rather than null for "none".
func List[E error](errs []E) []Diagnostic {
	out := make([]Diagnostic, 0, len(errs))
	for _, err := range errs {
		out = append(out, Of(err))
	}
	return out
}

// Messages returns one Diagnostic per message, never nil.
func Messages(msgs []string) []Diagnostic {
	out := make([]Diagnostic, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, Diagnostic{Message: m})
	}
	return out
}
