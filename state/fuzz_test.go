// SPDX-License-Identifier: Apache-2.0

package state

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// FuzzLoad feeds Load arbitrary state files, whole or torn: it never
// panics; a file that is not a state file is reported as corrupt with an
// empty state but for a salvaged pf token; a salvaged token is a decimal
// number that the file names as "pf_token"; and whatever Load accepts,
// Save writes and Load reads back the same.
func FuzzLoad(f *testing.F) {
	good := []byte(`{"version":1,"pf_token":"11012949885072952621","pf_enable_pending":{"at":"2026-12-02T01:00:00Z","tokens_before":["17"]},"slots":{"wan":0,"lte":1},` +
		`"profiles":{"wan|aa:bb":{"link":"wan","download_capacity_bits_per_second":100000000,"idle_rtt_ns":20000000}},"tc_owned_roots":["eth0"]}`)
	f.Add(good)
	for _, n := range []int{1, 20, 40, 60, len(good) / 2, len(good) - 1} {
		f.Add(good[:n]) // torn
	}
	f.Add([]byte(`{"pf_token":"1","pf_token":"2"`))
	f.Add([]byte(`{"version":99}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"pf_token":"12345678901234567890123","slots":{"x":-5}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Load(dir)
		if s == nil {
			t.Fatal("Load returned no state")
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a bad file gave %v, not ErrCorrupt", err)
			}
			if len(s.Slots) != 0 || len(s.Profiles) != 0 || len(s.TCOwnedRoots) != 0 || s.PFEnablePending != nil {
				t.Fatalf("a corrupt file left more than the token: %+v", s)
			}
			if s.PFToken != "" {
				named := regexp.MustCompile(`"pf_token"\s*:\s*"` + regexp.QuoteMeta(s.PFToken) + `"`)
				if !regexp.MustCompile(`^[0-9]+$`).MatchString(s.PFToken) || !named.Match(data) {
					t.Fatalf("salvaged token %q is not one the file names", s.PFToken)
				}
			}
			return
		}
		if s.Version != FormatVersion {
			t.Fatalf("accepted with version %d", s.Version)
		}
		if err := Save(dir, s); err != nil {
			t.Fatal(err)
		}
		first, _ := os.ReadFile(Path(dir))
		again, err := Load(dir)
		if err != nil {
			t.Fatalf("what Save wrote does not load: %v\n%s", err, first)
		}
		if err := Save(dir, again); err != nil {
			t.Fatal(err)
		}
		second, _ := os.ReadFile(Path(dir))
		if !bytes.Equal(first, second) {
			t.Fatalf("save/load is not stable:\n%s\n%s", first, second)
		}
	})
}
