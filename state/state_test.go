// SPDX-License-Identifier: Apache-2.0

package state

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	s := &State{PFToken: "1234567890", Profiles: map[string]Profile{
		ProfileKey("starlink", "74:24:9f:00:00:01"): {Link: "starlink", DownloadCapacity: 250e6, IdleRTT: 31 * time.Millisecond},
	}}
	if n, ok := s.Slot("starlink", 499); !ok || n != 0 {
		t.Fatalf("first slot = %d, %v", n, ok)
	}
	if err := Save(dir, s); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.PFToken != s.PFToken || got.Slots["starlink"] != 0 || got.Profiles["starlink@74:24:9f:00:00:01"].IdleRTT != 31*time.Millisecond {
		t.Fatalf("round trip lost data: %+v", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestLoadMissingIsEmpty(t *testing.T) {
	s, err := Load(t.TempDir())
	if err != nil || s.PFToken != "" || len(s.Slots) != 0 {
		t.Fatalf("Load(empty dir) = %+v, %v", s, err)
	}
}

func TestLoadCorruptIsReportedNotFatal(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(Path(dir), []byte("{not json"), 0o644)
	s, err := Load(dir)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
	if s == nil || s.PFToken != "" {
		t.Fatalf("corrupt file must give a usable empty state, got %+v", s)
	}
	os.WriteFile(Path(dir), []byte(`{"version": 9}`), 0o644)
	if _, err := Load(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("future version: err = %v, want ErrCorrupt", err)
	}
}

func TestSlotsAreStable(t *testing.T) {
	s := &State{}
	a, _ := s.Slot("a", 3)
	b, _ := s.Slot("b", 3)
	c, _ := s.Slot("c", 3)
	if a != 0 || b != 1 || c != 2 {
		t.Fatalf("slots a,b,c = %d,%d,%d", a, b, c)
	}
	if _, ok := s.Slot("d", 3); ok {
		t.Fatal("allocated beyond max")
	}
	// Removing b frees its slot; a and c keep theirs.
	s.ReleaseSlotsExcept(map[string]bool{"a": true, "c": true})
	d, ok := s.Slot("d", 3)
	if !ok || d != 1 {
		t.Fatalf("d = %d, %v; want the freed slot 1", d, ok)
	}
	if n, _ := s.Slot("c", 3); n != 2 {
		t.Fatalf("c moved to %d", n)
	}
}

// TestRecordMeasurementKeepsWhatTheControllerLearned: a measurement
// replaces the capacities and idle RTT, keeps the known-good rates, and
// an unmeasured idle RTT (0) keeps the old one.
func TestRecordMeasurementKeepsWhatTheControllerLearned(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	s := &State{Profiles: map[string]Profile{"home@74:24:9f:00:00:01": {
		Link: "home", DownloadCapacity: 1, UploadCapacity: 2, IdleRTT: 30 * time.Millisecond, GoodDownload: 80_000_000, GoodUpload: 18_000_000,
	}}}
	s.RecordMeasurement("home@74:24:9f:00:00:01", Profile{DownloadCapacity: 95_000_000, UploadCapacity: 21_000_000, MeasuredAt: at})
	got := s.Profiles["home@74:24:9f:00:00:01"]
	want := Profile{Link: "home", DownloadCapacity: 95_000_000, UploadCapacity: 21_000_000, IdleRTT: 30 * time.Millisecond,
		GoodDownload: 80_000_000, GoodUpload: 18_000_000, MeasuredAt: at, UpdatedAt: at}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	var empty State
	empty.RecordMeasurement("cafe", Profile{Link: "cafe", DownloadCapacity: 5, UploadCapacity: 1, IdleRTT: time.Millisecond, MeasuredAt: at})
	if p := empty.Profiles["cafe"]; p.Link != "cafe" || p.IdleRTT != time.Millisecond || p.DownloadCapacity != 5 {
		t.Errorf("a first measurement: %+v", p)
	}
}
