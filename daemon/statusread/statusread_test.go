// SPDX-License-Identifier: Apache-2.0

package statusread

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/state"
)

// TestReadTellsWhetherWatchRunsFromTheLock: when the daemon does not
// answer, the static picture says whether watch runs by the state lock
// it holds: running (with why it cannot be asked) when it holds it, a
// leftover socket when nobody does, and not running otherwise.
func TestReadTellsWhetherWatchRunsFromTheLock(t *testing.T) {
	dir := t.TempDir()
	facts := filepath.Join(dir, "facts.json")
	if err := os.WriteFile(facts, []byte(`{"interfaces":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{linkfacts.EnvFile: facts}
	notRunning := fmt.Errorf("%w: nothing listens", statusapi.ErrNotRunning)
	denied := fmt.Errorf("%w: root only", statusapi.ErrPermission)
	for _, tc := range []struct {
		name        string
		answer      error
		watchHolds  bool
		running     bool
		denied      bool
		noteHas     string
		pidExpected bool
	}{
		{"nothing answers, nothing holds the lock", notRunning, false, false, false, "nothing answers on", false},
		{"nothing answers, watch holds the lock", notRunning, true, true, false, "holds the state lock but does not answer", true},
		{"the socket refuses, watch holds the lock", denied, true, true, true, "its socket answers", true},
		{"the socket refuses, nobody holds the lock", denied, false, false, true, "is left over", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stateDir := filepath.Join(t.TempDir(), "state")
			if err := os.MkdirAll(stateDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.watchHolds {
				l, err := state.AcquireLock(context.Background(), stateDir, state.LockOptions{Wait: time.Second, Holder: state.HolderWatch, SkipOwnershipCheck: true})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Release()
			}
			st, err := Read(context.Background(), Options{
				ConfigDir: filepath.Join(dir, "links.d"), StateDir: stateDir, NotRoot: true,
				Getenv: func(k string) string { return env[k] },
				Fetch: func(context.Context, string, statusapi.Query) (statusapi.Status, error) {
					return statusapi.Status{}, tc.answer
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			d := st.Daemon
			if d.Running != tc.running || d.PermissionDenied != tc.denied || !strings.Contains(d.Note, tc.noteHas) || (d.PID == os.Getpid()) != tc.pidExpected {
				t.Errorf("daemon %+v; want running %v, denied %v, a note with %q, our pid %v", d, tc.running, tc.denied, tc.noteHas, tc.pidExpected)
			}
		})
	}
}

// TestReadPrefersTheDaemonsAnswer: a daemon that answers is the status.
func TestReadPrefersTheDaemonsAnswer(t *testing.T) {
	want := statusapi.Status{Daemon: statusapi.Daemon{Running: true, PID: 4242}}
	var asked statusapi.Query
	st, err := Read(context.Background(), Options{StateDir: t.TempDir(), Query: statusapi.Query{History: true},
		Fetch: func(_ context.Context, _ string, q statusapi.Query) (statusapi.Status, error) {
			asked = q
			return want, nil
		}})
	if err != nil || st.Daemon != want.Daemon || !asked.History {
		t.Errorf("Read = %+v, %v (asked %+v); want the daemon's answer to the query", st.Daemon, err, asked)
	}
}
