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
