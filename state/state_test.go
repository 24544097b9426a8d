// SPDX-License-Identifier: Apache-2.0

package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	s := &State{PFToken: "1234567890", Profiles: map[string]Profile{
		ProfileKey("starlink", "74:24:9f:00:00:01"): {Link: "starlink", DownloadCapacity: 250e6, IdleRTT: 31 * time.Millisecond},
	}}
	if n, ok := s.Slot("starlink", 499, nil); !ok || n != 0 {
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

// TestLoadCorruptRecoversTheToken: a torn or hand-broken file whose
// pf_token still reads gives that token back, so down can release the
// reference; SetAside keeps a copy of the broken file for a person to look at.
func TestLoadCorruptRecoversTheToken(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(Path(dir), []byte(`{"version": 1, "pf_token": "1844674407370955161", "slots": {"wan": 0,`), 0o644)
	s, err := Load(dir)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "pf token 1844674407370955161 was recovered") {
		t.Fatalf("err = %v, want ErrCorrupt naming the recovered token", err)
	}
	if s.PFToken != "1844674407370955161" || len(s.Slots) != 0 {
		t.Fatalf("state = %+v, want only the token", s)
	}
	aside, err := SetAside(dir)
	if err != nil || aside != Path(dir)+CorruptSuffix {
		t.Fatalf("SetAside = %q, %v", aside, err)
	}
	// The original stays until the rebuilt state replaces it, so a run
	// that stops before saving loses nothing (the token is salvaged again).
	if s, err := Load(dir); !errors.Is(err, ErrCorrupt) || s.PFToken != "1844674407370955161" {
		t.Fatalf("after SetAside the file no longer gives the token: %+v, %v", s, err)
	}
	if b, _ := os.ReadFile(aside); !strings.Contains(string(b), "1844674407370955161") {
		t.Fatalf("the set-aside file lost its content: %q", b)
	}

	// A token cut in half (no closing quote) or two tokens recover none.
	for _, text := range []string{`{"pf_token": "18446`, `{"pf_token": "1", "pf_token": "2", x`} {
		os.WriteFile(Path(dir), []byte(text), 0o644)
		if s, err := Load(dir); !errors.Is(err, ErrCorrupt) || s.PFToken != "" || !strings.Contains(err.Error(), "cannot be released") {
			t.Errorf("%s: token %q, err %v", text, s.PFToken, err)
		}
	}
}

// TestCheckOwnership: as for the config directory, a state directory or
// file that is not root's or that group or others can write is refused
// with the path, the problem and the fix; a missing one passes.
func TestCheckOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the check wants files owned by uid 0 (CI runs as root)")
	}
	base := t.TempDir()
	dir := filepath.Join(base, "db")
	if err := CheckOwnership(dir); err != nil {
		t.Fatalf("a missing directory: %v", err)
	}
	if err := Save(dir, &State{PFToken: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckOwnership(dir); err != nil {
		t.Fatalf("what Save creates must pass: %v", err)
	}
	var oe *OwnershipError
	os.Chmod(dir, 0o777)
	if err := CheckOwnership(dir); !errors.As(err, &oe) || oe.Path != dir ||
		!strings.Contains(err.Error(), "writable by group or others (mode 0777)") || !strings.Contains(err.Error(), "sudo chmod go-w "+dir) {
		t.Fatalf("world-writable dir: %v", err)
	}
	os.Chmod(dir, 0o755)
	os.Chmod(Path(dir), 0o664)
	if err := CheckOwnership(dir); !errors.As(err, &oe) || oe.Path != Path(dir) {
		t.Fatalf("group-writable file: %v", err)
	}
	os.Chmod(Path(dir), 0o644)
	os.Chown(Path(dir), 501, 20)
	if err := CheckOwnership(dir); !errors.As(err, &oe) || oe.Path != Path(dir) ||
		!strings.Contains(err.Error(), "owned by uid 501, not root") || !strings.Contains(err.Error(), "sudo chown root:") {
		t.Fatalf("a file another user owns: %v", err)
	}
	os.Chown(Path(dir), 0, 0)
	os.Chown(dir, 501, 20)
	if err := CheckOwnership(dir); !errors.As(err, &oe) || oe.Path != dir {
		t.Fatalf("a directory another user owns: %v", err)
	}
	os.Chown(dir, 0, 0)
	os.Remove(Path(dir))
	os.Symlink("/etc/passwd", Path(dir))
	if err := CheckOwnership(dir); !errors.As(err, &oe) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a symlinked state file: %v", err)
	}
	os.Remove(Path(dir))
	// A directory above that others may write is refused too, as ssh
	// refuses a key below one: they could swap in a state of their own.
	os.Chmod(base, 0o777)
	if err := CheckOwnership(dir); !errors.As(err, &oe) || oe.Path != base ||
		!strings.Contains(err.Error(), "writable by group or others (mode 0777), and it lies above the state directory "+dir) ||
		!strings.Contains(err.Error(), "sudo chmod go-w "+base) {
		t.Fatalf("a world-writable parent: %v", err)
	}
	os.Chmod(base, 0o700)
}

// TestLoadRefusesSpecialFiles: a FIFO in the state file's place is an
// error at once; reading it used to block every command.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(Path(dir), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(dir); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "is not a regular file (a named pipe)") {
			t.Fatalf("Load: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Load hung on a FIFO")
	}
}

// TestSlotSkipsBlocked: a slot whose pipes belong to someone else is never
// handed out, however low.
func TestSlotSkipsBlocked(t *testing.T) {
	s := &State{Slots: map[string]int{"a": 0}}
	if n, ok := s.Slot("b", 4, map[int]bool{1: true, 2: true}); !ok || n != 3 {
		t.Fatalf("b = %d, %v; want 3 (0 held, 1 and 2 blocked)", n, ok)
	}
	if _, ok := s.Slot("c", 4, map[int]bool{1: true, 2: true}); ok {
		t.Fatal("allocated a blocked slot")
	}
	if n, _ := s.Slot("a", 4, map[int]bool{0: true}); n != 0 {
		t.Fatalf("a held slot moved because it is blocked: %d", n)
	}
}

func TestSlotsAreStable(t *testing.T) {
	s := &State{}
	a, _ := s.Slot("a", 3, nil)
	b, _ := s.Slot("b", 3, nil)
	c, _ := s.Slot("c", 3, nil)
	if a != 0 || b != 1 || c != 2 {
		t.Fatalf("slots a,b,c = %d,%d,%d", a, b, c)
	}
	if _, ok := s.Slot("d", 3, nil); ok {
		t.Fatal("allocated beyond max")
	}
	// Removing b frees its slot; a and c keep theirs.
	s.ReleaseSlotsExcept(map[string]bool{"a": true, "c": true})
	d, ok := s.Slot("d", 3, nil)
	if !ok || d != 1 {
		t.Fatalf("d = %d, %v; want the freed slot 1", d, ok)
	}
	if n, _ := s.Slot("c", 3, nil); n != 2 {
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
		PeakDownload: 95_000_000, PeakUpload: 21_000_000,
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

// TestRecordMeasurementKeepsTheProbeChoice: a measurement that compared
// ICMP with TCP records its choice; one that compared nothing keeps it.
func TestRecordMeasurementKeepsTheProbeChoice(t *testing.T) {
	var s State
	key := "home@74:24:9f:00:00:01"
	for _, c := range []struct{ measured, want string }{{"", ""}, {"tcp", "tcp"}, {"", "tcp"}, {"icmp", "icmp"}} {
		s.RecordMeasurement(key, Profile{Link: "home", DownloadCapacity: 1, UploadCapacity: 1, ProbeKind: c.measured})
		if got := s.Profiles[key].ProbeKind; got != c.want {
			t.Errorf("after a measurement choosing %q: probe kind %q, want %q", c.measured, got, c.want)
		}
	}
}

// TestRecordMeasurementKeepsThePeak: the latest measurement replaces the
// capacities (for "auto" base rates) while the peaks only rise (for
// max = "auto"), so one poor measurement does not cap the controller.
func TestRecordMeasurementKeepsThePeak(t *testing.T) {
	var s State
	key := "home@74:24:9f:00:00:01"
	for _, m := range []struct{ down, up int64 }{{95_000_000, 20_000_000}, {40_000_000, 22_000_000}, {90_000_000, 5_000_000}} {
		s.RecordMeasurement(key, Profile{Link: "home", DownloadCapacity: m.down, UploadCapacity: m.up})
	}
	p := s.Profiles[key]
	down, up := p.Peaks()
	if p.DownloadCapacity != 90_000_000 || p.UploadCapacity != 5_000_000 || down != 95_000_000 || up != 22_000_000 {
		t.Errorf("latest %d/%d, peaks %d/%d; want latest 90M/5M and peaks 95M/22M", p.DownloadCapacity, p.UploadCapacity, down, up)
	}
}

// TestStateWithoutPeaksReadsTheLatestAsPeak: a state file written before
// peaks were kept still loads, its capacity serves as the peak, and the
// next measurement keeps the higher of the two.
func TestStateWithoutPeaksReadsTheLatestAsPeak(t *testing.T) {
	dir := t.TempDir()
	old := `{"version":1,"profiles":{"home@74:24:9f:00:00:01":{"link":"home",` +
		`"download_capacity_bits_per_second":95000000,"upload_capacity_bits_per_second":21000000,"idle_rtt_ns":31000000}}}`
	if err := os.WriteFile(Path(dir), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	key := "home@74:24:9f:00:00:01"
	if down, up := s.Profiles[key].Peaks(); down != 95_000_000 || up != 21_000_000 {
		t.Errorf("peaks of an old file %d/%d, want its capacities", down, up)
	}
	s.RecordMeasurement(key, Profile{DownloadCapacity: 50_000_000, UploadCapacity: 30_000_000})
	if err := Save(dir, s); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(Path(dir))
	for _, want := range []string{`"peak_download_capacity_bits_per_second": 95000000`, `"peak_upload_capacity_bits_per_second": 30000000`, `"download_capacity_bits_per_second": 50000000`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("saved state lacks %s:\n%s", want, b)
		}
	}
}

// TestCheckOwnershipFollowsALinkedDirectory: a state_dir that is a
// symbolic link is judged by the directory it leads to.
func TestCheckOwnershipFollowsALinkedDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the check wants files owned by uid 0 (CI runs as root)")
	}
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := Save(real, &State{}); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := CheckOwnership(link); err != nil {
		t.Fatalf("a link to a safe directory: %v", err)
	}
	if err := os.Chmod(real, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := CheckOwnership(link); err == nil {
		t.Fatal("a link to a world-writable directory was accepted")
	}
}

// TestPauseInForce: a pause holds from its start to its end; a clock
// that reads before its start ends it (it cannot tell how long it ran).
func TestPauseInForce(t *testing.T) {
	since := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	p := Pause{Since: since, Until: since.Add(time.Hour), By: "alice"}
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{-time.Second, false}, {0, true}, {59 * time.Minute, true}, {time.Hour, false}, {2 * time.Hour, false}} {
		if got := p.InForce(since.Add(tc.at)); got != tc.want {
			t.Errorf("InForce at start%+v = %v, want %v", tc.at, got, tc.want)
		}
	}
	// It survives a save and a load, and a clone shares nothing.
	dir := t.TempDir()
	if err := Save(dir, &State{Pauses: map[string]Pause{AllLinks: p}}); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil || !got.Pauses[AllLinks].Until.Equal(p.Until) || got.Pauses[AllLinks].By != "alice" {
		t.Fatalf("loaded %+v, %v", got.Pauses, err)
	}
	c := got.Clone()
	delete(c.Pauses, AllLinks)
	if len(got.Pauses) != 1 {
		t.Error("the clone shares its pauses")
	}
}
