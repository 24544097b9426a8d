// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/daemon/operator"
)

// TestSocketPathFitsTheKernel: a state directory deep enough that
// watch.sock inside it cannot be bound gets a short socket in root's
// runtime directory, named after the directory, on each system's limit.
func TestSocketPathFitsTheKernel(t *testing.T) {
	deep := "/var/db/" + strings.Repeat("d", 120)
	for _, tc := range []struct {
		goos, dir, want string
	}{
		{"darwin", "/var/db/macake", "/var/db/macake/watch.sock"},
		{"linux", "/var/lib/macake", "/var/lib/macake/watch.sock"},
		{"darwin", "/" + strings.Repeat("a", 91), "/" + strings.Repeat("a", 91) + "/watch.sock"}, // 103 bytes
		{"darwin", "/" + strings.Repeat("a", 92), "/var/run/macake-"},                            // 104
		{"linux", "/" + strings.Repeat("a", 95), "/" + strings.Repeat("a", 95) + "/watch.sock"},  // 107
		{"linux", "/" + strings.Repeat("a", 96), "/run/macake-"},                                 // 108
		{"linux", deep, "/run/macake-"},
	} {
		got := socketPathFor(tc.goos, tc.dir)
		if !strings.HasPrefix(got, tc.want) || len(got) > maxSocketPathFor(tc.goos) {
			t.Errorf("%s %s (%d bytes): %s, want %s…", tc.goos, tc.dir, len(tc.dir), got, tc.want)
		}
	}
	if a, b := socketPathFor("linux", deep), socketPathFor("linux", deep+"x"); a == b {
		t.Errorf("two state directories share the socket %s", a)
	}
	if a, b := socketPathFor("linux", deep), socketPathFor("linux", deep+"/"); a != b {
		t.Errorf("the same directory spelt two ways gives %s and %s", a, b)
	}
}

// TestLongStateDirStillAnswers is issue 12's reproduction: with a state
// directory whose watch.sock would exceed the kernel's limit, the daemon's
// socket binds and a client finds it.
func TestLongStateDirStillAnswers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the short socket lives in root's runtime directory; run as root")
	}
	dir := t.TempDir()
	for len(filepath.Join(dir, SocketName)) <= maxSocketPathFor("linux")+1 {
		dir = filepath.Join(dir, strings.Repeat("d", 30))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := SocketPath(dir)
	ln, err := Listen(path, operator.Policy{})
	if err != nil {
		t.Fatalf("a %d-byte state directory: %v", len(dir), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Serve(ctx, ln, Handler{Status: func(context.Context, Query) Status {
		return Status{FormatVersion: FormatVersion, Daemon: Daemon{Running: true, PID: 42}}
	}}, nil)
	st, err := Fetch(context.Background(), SocketPath(dir))
	if err != nil || !st.Daemon.Running {
		t.Fatalf("Fetch: %+v, %v", st.Daemon, err)
	}
}
