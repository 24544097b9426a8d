// SPDX-License-Identifier: Apache-2.0

package diag_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/macake/macake/diag"
)

type positioned struct{}

func (positioned) Error() string { return "a.toml:3:7: bad" }
func (positioned) Diagnostic() diag.Diagnostic {
	return diag.Diagnostic{File: "a.toml", Line: 3, Column: 7, Message: "bad"}
}

// TestSchema: the one JSON form, with what is unknown left out.
func TestSchema(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New("pfctl: exit status 1"), `{"message":"pfctl: exit status 1"}`},
		{positioned{}, `{"message":"bad","file":"a.toml","line":3,"column":7}`},
		{fmt.Errorf("loading: %w", positioned{}), `{"message":"bad","file":"a.toml","line":3,"column":7}`},
	} {
		b, err := json.Marshal(diag.Of(tc.err))
		if err != nil || string(b) != tc.want {
			t.Errorf("%v: %s, want %s", tc.err, b, tc.want)
		}
	}
	if b, _ := json.Marshal(diag.List([]error(nil))); string(b) != "[]" {
		t.Errorf("no errors: %s, want []", b)
	}
	if b, _ := json.Marshal(diag.Messages([]string{"x"})); string(b) != `[{"message":"x"}]` {
		t.Errorf("messages: %s", b)
	}
	if diag.Of(nil) != (diag.Diagnostic{}) {
		t.Error("Of(nil) is not zero")
	}
}
