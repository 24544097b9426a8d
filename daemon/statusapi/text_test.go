// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/macake/macake/internal/golden"
)

// readStatus reads a recorded status document.
func readStatus(t *testing.T, path string) Status {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestWriteTextOfARecordedDaemon renders the status TestRecordStatusDocument
// recorded (ten minutes of a link: idle, a bloated download the controller
// cut for, recovery, a burst into the download pipe): the shapers with
// their counters, the history as sparklines, the last events.
func TestWriteTextOfARecordedDaemon(t *testing.T) {
	st := readStatus(t, "testdata/watch-status.json")
	h := st.Links[0].History
	now := time.UnixMilli(h.Times[len(h.Times)-1]).UTC()
	var b bytes.Buffer
	WriteText(&b, st, TextOptions{Now: now, GOOS: "darwin"})
	golden.Check(t, "testdata/watch-status.txt", b.Bytes(), "what `macake status` prints for a running daemon")
}
