// SPDX-License-Identifier: Apache-2.0

package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestReadJSON: a fixture decodes into the type asked for, and a file
// that does not decode into it fails the test, naming the file.
func TestReadJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "doc.json")
	os.WriteFile(path, []byte(`{"name":"wan","slots":[1,2]}`), 0o644)
	type doc struct {
		Name  string `json:"name"`
		Slots []int  `json:"slots"`
	}
	if got := ReadJSON[doc](t, path); got.Name != "wan" || len(got.Slots) != 2 || got.Slots[1] != 2 {
		t.Errorf("read %+v", got)
	}
	var rec recorder
	ReadJSON[[]string](&rec, path)
	if !rec.failed || rec.msg == "" || rec.msg[:len(path)] != path {
		t.Errorf("an object read as a list: failed %v, %q; want a failure naming %s", rec.failed, rec.msg, path)
	}
}

// recorder is a testing.TB that records a Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
}
