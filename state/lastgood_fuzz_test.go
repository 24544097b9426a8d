// SPDX-License-Identifier: Apache-2.0

package state

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
)

// FuzzLastGoodStore puts arbitrary bytes where watch keeps a link's last
// good copy (a damaged disk, another version's file, someone's edit): Load
// never panics, and it offers the copy as a fallback only when the copy
// is a policy this macake accepts, parsed under the link's own file name
// and identical to parsing those bytes afresh. A Save of an accepted file
// then replaces whatever was there, and Load gives exactly that link.
func FuzzLastGoodStore(f *testing.F) {
	good := configtest.Policy{Interface: "en0", Mode: "fixed", Download: "50mbit", Upload: "5mbit"}.TOML()
	f.Add([]byte(good))
	f.Add([]byte(good[:len(good)/2]))
	f.Add([]byte("[match]\ninterface = \"en1\"\n"))
	f.Add([]byte("\x00\xff[match"))
	f.Add([]byte(""))
	opts := config.LoadOptions{SkipOwnershipCheck: true}
	f.Fuzz(func(t *testing.T, copyBytes []byte) {
		dir, stateDir := t.TempDir(), t.TempDir()
		file := filepath.Join(dir, "cable.toml")
		s := NewLastGoodStore(stateDir)
		if err := os.MkdirAll(LastGoodDir(stateDir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.Path("cable"), copyBytes, 0o600); err != nil {
			t.Fatal(err)
		}
		l, ok := s.Load("cable", file, opts)
		if ok {
			want, _, err := config.Parse(file, copyBytes, opts)
			if err != nil || !reflect.DeepEqual(l, want) || l.File != file {
				t.Fatalf("Load offered %+v from a copy that parses to %+v (%v)", l, want, err)
			}
		}
		if err := os.WriteFile(file, []byte(good), 0o644); err != nil {
			t.Fatal(err)
		}
		accepted, _, err := config.Parse(file, []byte(good), opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Save(accepted, opts); err != nil {
			t.Fatal(err)
		}
		again, ok := NewLastGoodStore(stateDir).Load("cable", file, opts)
		if !ok || !reflect.DeepEqual(again, accepted) {
			t.Fatalf("after saving the accepted file, a new store loads %+v (ok %v), want %+v", again, ok, accepted)
		}
	})
}
