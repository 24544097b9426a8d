// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
)

// TestJSONErrorsShareOneSchema: the same broken policy file is reported by
// every command's --json in one form (docs/OPERATIONS.md, "JSON errors"):
// message, file, line and column, with the same keys and values, and an
// apply that stops on it reports it as such an object too, never as a
// string (issue 12, item 13).
func TestJSONErrorsShareOneSchema(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy, "lte": strings.Replace(ltePolicy, `"30mbit"`, `"30mbps"`, 1)}, starlinkFacts)
	want := map[string]any{"file": filepath.Join(r.configDir, "lte.toml"), "line": 4.0, "column": 12.0}
	for _, c := range []struct {
		args []string
		path []string // to the list of errors
		code int
		// extra are the keys a document adds beside the schema's
		extra []string
	}{
		{[]string{"validate", "--json"}, []string{"errors"}, exitcode.Config, nil},
		{[]string{"links", "--json"}, []string{"errors"}, exitcode.Config, nil},
		{[]string{"plan", "--json"}, []string{"errors"}, exitcode.Config, nil},
		{[]string{"apply", "--json"}, []string{"errors"}, exitcode.Config, nil},
		{[]string{"status", "--json"}, []string{"config_errors"}, exitcode.OK, []string{"link", "kept"}},
	} {
		code, stdout, stderr := r.run(c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s", c.args, code, c.code, stderr)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Errorf("%v: not JSON: %v\n%s", c.args, err, stdout)
			continue
		}
		list, _ := doc[c.path[0]].([]any)
		if len(list) != 1 {
			t.Errorf("%v: %s = %v, want one error", c.args, c.path[0], doc[c.path[0]])
			continue
		}
		e, _ := list[0].(map[string]any)
		keys := slices.Sorted(maps.Keys(e))
		wantKeys := slices.Sorted(slices.Values(append([]string{"message", "file", "line", "column"}, c.extra...)))
		if !reflect.DeepEqual(keys, wantKeys) {
			t.Errorf("%v: error keys %v, want %v", c.args, keys, wantKeys)
		}
		for k, v := range want {
			if e[k] != v {
				t.Errorf("%v: %s = %v, want %v", c.args, k, e[k], v)
			}
		}
		if msg, _ := e["message"].(string); !strings.HasPrefix(msg, `shaper.download: rate "30mbps"`) {
			t.Errorf("%v: message %q", c.args, msg)
		}
	}
}

// TestJSONApplyErrorsAreObjects: an error that is not about a file (the
// backend failed) is an object with its message, in apply and down alike.
func TestJSONApplyErrorsAreObjects(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	r.emu.SetToolsMissing(true)
	for _, args := range [][]string{{"apply", "--json"}, {"down", "--json"}} {
		code, stdout, _ := r.run(args...)
		var doc struct {
			FormatVersion string           `json:"format_version"`
			Errors        []map[string]any `json:"errors"`
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != exitcode.Unavailable {
			t.Errorf("%v: exit %d, %v\n%s", args, code, err, stdout)
			continue
		}
		if len(doc.Errors) != 1 || doc.Errors[0]["message"] == "" || doc.FormatVersion != "2.0" {
			t.Errorf("%v: %+v", args, doc)
		}
	}
}
