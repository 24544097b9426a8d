// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/internal/syncbuf"
)

// TestStatusSocketComesBack: a socket that cannot be bound at the start
// is logged as such and bound once the obstacle is gone, so `macake
// status` reaches a watch that has been shaping all along.
func TestStatusSocketComesBack(t *testing.T) {
	socket := filepath.Join(t.TempDir(), statusapi.SocketName)
	if err := os.WriteFile(socket, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveStatus(ctx, socket, statusapi.Handler{Status: func(context.Context, statusapi.Query) statusapi.Status {
			return statusapi.Status{FormatVersion: statusapi.FormatVersion, Daemon: statusapi.Daemon{Running: true, PID: 7}}
		}}, log, 10*time.Millisecond)
	}()
	waitFor(t, "the bind failure logged", func() bool { return strings.Contains(logs.String(), "cannot ask this daemon") })
	if _, err := statusapi.Fetch(ctx, socket); err == nil {
		t.Fatal("a file that is no socket answered")
	}
	os.Remove(socket)
	waitFor(t, "the socket answers", func() bool {
		st, err := statusapi.Fetch(ctx, socket)
		return err == nil && st.Daemon.Running
	})
	if !strings.Contains(logs.String(), "can ask this daemon again") {
		t.Errorf("the recovery is not logged:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "cannot ask this daemon"); n != 1 {
		t.Errorf("the same failure logged %d times, want once:\n%s", n, logs.String())
	}
	cancel()
	<-done
}

// waitFor polls cond until it holds; the bound only keeps a broken test
// from hanging, it asserts nothing about speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: never happened", what)
}
