// SPDX-License-Identifier: Apache-2.0

package scratch

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestLedgerIsOnDiskBeforeEachObject: every Add is in the file when it
// returns, so a SIGKILL right after it leaves a record naming the object.
func TestLedgerIsOnDiskBeforeEachObject(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := Load(dir); ok || err != nil {
		t.Fatalf("no record yet: %v %v", ok, err)
	}
	started := time.Unix(1_700_000_000, 0).UTC()
	l, err := Open(dir, "pf", started)
	if err != nil {
		t.Fatal(err)
	}
	steps := []func() error{
		func() error { return l.SetAnchor("com.apple/macake-selftest") },
		func() error { return l.AddPipe(65000) },
		func() error { return l.AddPipe(65017) },
		func() error { return l.AddPipe(65000) },
		func() error { return l.AddToken("1234") },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	rec, ok, err := Load(dir)
	if err != nil || !ok {
		t.Fatalf("load: %v %v", ok, err)
	}
	if rec.PID != os.Getpid() || !rec.Started.Equal(started) || rec.Backend != "pf" || rec.Anchor != "com.apple/macake-selftest" ||
		len(rec.Pipes) != 2 || rec.Pipes[1] != 65017 || len(rec.Tokens) != 1 || rec.Empty() {
		t.Fatalf("record %+v", rec)
	}
	if got := l.Record(); got.Anchor != rec.Anchor || len(got.Pipes) != 2 {
		t.Fatalf("in memory %+v", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := Load(dir); ok {
		t.Fatal("Close must remove the record")
	}
	if err := Remove(dir); err != nil {
		t.Fatalf("removing a missing record: %v", err)
	}
}

func TestCorruptRecordSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(Path(dir), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "remove it once its objects are gone") {
		t.Fatalf("corrupt record: %v", err)
	}
}

// FuzzLoad: whatever bytes are in the record's place (a disk error, a
// hand edit), Load returns a record or an error that names the file, and
// never panics; a record it accepts survives being written again.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"pid":4242,"started":"2026-12-01T23:00:00Z","backend":"pf","anchor":"com.apple/macake-selftest","pipes":[65000,65001],"pf_tokens":["1234"]}`))
	f.Add([]byte(`{"pid":1,"started":"2026-12-01T23:00:00Z","backend":"tc","netns":"macake-selftest"}`))
	f.Add([]byte(`{"pipes":["x"]}`))
	f.Add([]byte("{"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(Path(dir), b, 0o644); err != nil {
			t.Fatal(err)
		}
		rec, ok, err := Load(dir)
		if err != nil {
			if ok || !strings.Contains(err.Error(), Path(dir)) {
				t.Fatalf("ok %v, error %v: the error must name the file", ok, err)
			}
			return
		}
		if !ok {
			t.Fatal("a record file that exists must load or fail")
		}
		l := &Ledger{dir: dir, rec: rec}
		if err := l.save(); err != nil {
			t.Fatal(err)
		}
		again, ok, err := Load(dir)
		if err != nil || !ok || again.PID != rec.PID || again.Backend != rec.Backend || again.Anchor != rec.Anchor ||
			again.Netns != rec.Netns || len(again.Pipes) != len(rec.Pipes) || len(again.Tokens) != len(rec.Tokens) {
			t.Fatalf("written again: %+v %v %v, was %+v", again, ok, err, rec)
		}
	})
}
