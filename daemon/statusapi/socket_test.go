// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/macake/macake/daemon/operator"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/testuser"
	"github.com/macake/macake/state"
)

// TestSocketRoundTrip: the daemon's side answers a status request with
// the current snapshot; the socket has mode 0660; a clean stop removes it,
// after which Fetch says the daemon is not running.
func TestSocketRoundTrip(t *testing.T) {
	path := SocketPath(t.TempDir())
	ln, err := Listen(path, operator.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != SocketMode {
		t.Fatalf("socket mode: %v %v, want %o", info.Mode(), err, SocketMode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	n := 0
	go func() {
		served <- Serve(ctx, ln, Handler{Status: func(context.Context, Query) Status {
			n++
			return Status{FormatVersion: FormatVersion, Daemon: Daemon{Running: true, PID: 42}, Links: []Link{{Name: "wan"}}}
		}}, nil)
	}()
	for i := range 2 {
		st, err := Fetch(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Daemon.Running || st.Daemon.PID != 42 || len(st.Links) != 1 || st.Links[0].Name != "wan" {
			t.Fatalf("request %d: %+v", i, st)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is left behind after a clean stop: %v", err)
	}
	if _, err := Fetch(context.Background(), path); !errors.Is(err, ErrNotRunning) {
		t.Errorf("after stop: %v, want ErrNotRunning", err)
	}
}

// TestListenReplacesAStaleSocket: a socket left by a daemon that was
// killed answers nothing; the next daemon replaces it, and until then
// Fetch says nobody runs.
func TestListenReplacesAStaleSocket(t *testing.T) {
	path := SocketPath(t.TempDir())
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // as a kill -9 leaves it: the file without a listener
	if _, err := Fetch(context.Background(), path); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("stale socket: %v, want ErrNotRunning", err)
	}
	ln, err := Listen(path, operator.Policy{})
	if err != nil {
		t.Fatalf("replacing the stale socket: %v", err)
	}
	defer ln.Close()
	if _, err := Listen(path, operator.Policy{}); err == nil || !strings.Contains(err.Error(), "answers on it") {
		t.Errorf("a second Listen on a live socket: %v", err)
	}
}

// TestServeRejectsBadRequests: a request in another major version or for
// something else gets an error that says so.
func TestServeRejectsBadRequests(t *testing.T) {
	path := SocketPath(t.TempDir())
	ln, err := Listen(path, operator.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	go Serve(t.Context(), ln, Handler{Status: func(context.Context, Query) Status { return Status{} }}, nil)
	for req, want := range map[string]string{
		`{"format_version":"9.0","request":"status"}`:                        "speaks " + FormatVersion,
		`{"format_version":"` + FormatVersion + `","request":"stop"}`:        `unknown request`,
		`{"format_version":"` + FormatVersion + `","request":"measurement"}`: "takes no measurements",
		`not json`: "not JSON",
	} {
		line := rawRequest(t, path, req)
		if !strings.Contains(line, want) || !strings.Contains(line, `"format_version":"`+FormatVersion+`"`) {
			t.Errorf("%s: answer %q, want it to contain %q", req, line, want)
		}
	}
}

// rawRequest sends one line to the socket at path and returns the line it
// answers.
func rawRequest(t *testing.T, path, req string) string {
	t.Helper()
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(req + "\n"))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line
}

// TestSendMeasurement: a measurement reaches the handler intact and the
// client returns once the handler has saved it; a handler's failure comes
// back as the client's error; a request without a profile is refused.
func TestSendMeasurement(t *testing.T) {
	path := SocketPath(t.TempDir())
	ln, err := Listen(path, operator.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []Measurement
	fail := false
	go Serve(t.Context(), ln, Handler{
		Status: func(context.Context, Query) Status { return Status{} },
		Measurement: func(_ context.Context, m Measurement) error {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				return errors.New("saving the state file: disk full")
			}
			got = append(got, m)
			return nil
		},
	}, nil)
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	m := Measurement{Key: "home@74:24:9f:00:00:01", Profile: state.Profile{Link: "home", DownloadCapacity: 95_000_000, UploadCapacity: 21_000_000, IdleRTT: 31415926, MeasuredAt: at}}
	if err := SendMeasurement(t.Context(), path, m); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Key != m.Key || got[0].Profile.IdleRTT != m.Profile.IdleRTT || !got[0].Profile.MeasuredAt.Equal(at) || got[0].Profile.DownloadCapacity != m.Profile.DownloadCapacity {
		t.Fatalf("the daemon got %+v, want %+v", got, m)
	}
	fail = true
	mu.Unlock()
	if err := SendMeasurement(t.Context(), path, m); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("a failed save: %v", err)
	}
	if err := SendMeasurement(t.Context(), path, Measurement{}); err == nil || !strings.Contains(err.Error(), "no profile") {
		t.Errorf("an empty measurement: %v", err)
	}
	if err := SendMeasurement(t.Context(), path+".none", m); !errors.Is(err, ErrNotRunning) {
		t.Errorf("no daemon: %v, want ErrNotRunning", err)
	}
	mu.Lock()
}

// TestOnlyOperatorsPause: everyone who may connect reads the status; a
// member of the operator group may pause and resume, and an outsider may
// not; neither may hand in a measurement, which only root may. The
// clients are throw-away users (needs root to make them).
func TestOnlyOperatorsPause(t *testing.T) {
	if os.Getenv("STATUSAPI_CHILD_SOCKET") != "" {
		t.Skip("the child half runs in TestOnlyOperatorsPauseChild")
	}
	testuser.Skip(t)
	group, _ := testuser.Group(t)
	member, outsider := testuser.New(t, group), testuser.New(t)
	ops, err := operator.NewPolicy(group)
	if err != nil {
		t.Fatal(err)
	}
	dir, child := testuser.Dir(t, "statusapi.test")
	path := SocketPath(dir)
	ln, err := Listen(path, ops)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || Readers(path) != "root and group "+group {
		t.Errorf("the socket's readers: %q (%v, %v)", Readers(path), info, err)
	}
	os.Chmod(path, 0o666) // the outsider may connect too: the check is the peer's credentials
	var mu sync.Mutex
	var took []PauseChange
	measured := atomic.Int32{}
	go Serve(t.Context(), ln, Handler{
		Status:      func(context.Context, Query) Status { return Status{Daemon: Daemon{Running: true}} },
		Measurement: func(context.Context, Measurement) error { measured.Add(1); return nil },
		Pause: func(_ context.Context, c PauseChange) (*Pause, error) {
			mu.Lock()
			defer mu.Unlock()
			took = append(took, c)
			if c.For == 0 {
				return nil, nil
			}
			return &Pause{Link: c.Link, Until: time.Now().Add(c.For), By: c.By}, nil
		},
		Operators: ops,
	}, nil)
	run := func(u testuser.User) string {
		cmd := u.Command(child, "-test.run=^TestOnlyOperatorsPauseChild$", "-test.count=1", "-test.v")
		cmd.Argv = append([]string{"/usr/bin/env", "STATUSAPI_CHILD_SOCKET=" + path}, cmd.Argv...)
		res, err := execrun.Exec{Timeout: time.Minute}.Run(context.Background(), cmd)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("the child as %s: %v\n%s%s", u.Name, err, res.Stdout, res.Stderr)
		}
		return string(res.Stdout)
	}
	out := run(outsider)
	for _, want := range []string{"status ok",
		fmt.Sprintf("measurement: macake watch on %s: only root may send macake watch a measurement (uid %d (%s) asked); run macake measure with sudo", path, outsider.UID, outsider.Name),
		fmt.Sprintf("pause: macake watch on %s: only root and members of group %s may send macake watch a pause (uid %d (%s) asked); run macake pause with sudo, or join group %s", path, group, outsider.UID, outsider.Name, group),
		"resume: macake watch on " + path + ": only root and members of group " + group + " may send macake watch a resume",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the outsider's output lacks %q:\n%s", want, out)
		}
	}
	mu.Lock()
	if len(took) != 0 || measured.Load() != 0 {
		t.Errorf("the outsider's requests were taken: %+v, %d measurements", took, measured.Load())
	}
	mu.Unlock()
	out = run(member)
	for _, want := range []string{"status ok", "measurement: macake watch on " + path + ": only root may send macake watch a measurement",
		"pause: <nil> home until", "resume: <nil> <nil>"} {
		if !strings.Contains(out, want) {
			t.Errorf("the member's output lacks %q:\n%s", want, out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(took) != 2 || took[0] != (PauseChange{Link: "home", For: 90 * time.Second, By: member.Name}) || took[1] != (PauseChange{Link: "home", By: member.Name}) || measured.Load() != 0 {
		t.Errorf("the member's requests arrived as %+v (%d measurements)", took, measured.Load())
	}
}

// forAnotherUser makes what a test needs to be asked by another user (uid
// 65534): a directory that user can enter, holding a copy of this test
// binary to run as it (child) and a socket it may connect to (path, ln).
// It skips the test unless run as root, who alone can start that process.
func forAnotherUser(t *testing.T) (dir, child, path string, ln net.Listener) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user (CI runs as root)")
	}
	dir, child = testuser.Dir(t, "statusapi.test")
	path = SocketPath(dir)
	var err error
	if ln, err = Listen(path, operator.Policy{}); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o666) // as if nobody were in the socket's group
	return dir, child, path, ln
}

// TestOnlyOperatorsPauseChild is the other users' half.
func TestOnlyOperatorsPauseChild(t *testing.T) {
	path := os.Getenv("STATUSAPI_CHILD_SOCKET")
	if path == "" {
		t.Skip("started by TestOnlyOperatorsPause")
	}
	if _, err := Fetch(context.Background(), path); err != nil {
		t.Fatalf("status: %v", err)
	}
	fmt.Println("status ok")
	err := SendMeasurement(context.Background(), path, Measurement{Key: "home", Profile: state.Profile{DownloadCapacity: 1, UploadCapacity: 1}})
	fmt.Println("measurement:", err)
	p, err := SendPause(context.Background(), path, "home", 90*time.Second)
	if p != nil {
		fmt.Println("pause:", err, p.Link, "until", p.Until.Format(time.RFC3339))
	} else {
		fmt.Println("pause:", err)
	}
	p, err = SendPause(context.Background(), path, "home", 0)
	fmt.Println("resume:", err, p)
}

// TestPauseRequestsAreChecked: a pause request whose length or link
// cannot be one is refused before it reaches the daemon, with what is
// wrong; root's requests arrive with their link and length.
func TestPauseRequestsAreChecked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watch.sock")
	ln, err := Listen(path, operator.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan PauseChange, 8)
	go Serve(t.Context(), ln, Handler{Pause: func(_ context.Context, c PauseChange) (*Pause, error) { got <- c; return nil, nil }}, nil)
	for req, want := range map[string]string{
		`{"format_version":"` + FormatVersion + `","request":"pause","pause_seconds":-5}`:                     "a pause lasts 0 (resume) or more seconds",
		`{"format_version":"` + FormatVersion + `","request":"pause","pause_seconds":1e300}`:                  "beyond any pause",
		`{"format_version":"` + FormatVersion + `","request":"pause","pause_seconds":60,"pause_link":"../x"}`: `cannot name a link (lower-case`,
		`{"format_version":"` + FormatVersion + `","request":"pause","pause_seconds":"soon"}`:                 "not JSON",
	} {
		if line := rawRequest(t, path, req); !strings.Contains(line, want) {
			t.Errorf("%s: answer %q, want %q", req, line, want)
		}
	}
	for _, want := range []PauseChange{{Link: "home", For: 90 * time.Second, By: "root"}, {By: "root"}} {
		if _, err := SendPause(context.Background(), path, want.Link, want.For); err != nil {
			t.Fatal(err)
		}
		if c := <-got; c != want {
			t.Errorf("pause handed over as %+v, want %+v", c, want)
		}
	}
	select {
	case c := <-got:
		t.Errorf("a bad request reached the daemon: %+v", c)
	default:
	}
}

// TestPauseWaitsForTheReconcile: a pause's answer comes when the
// reconcile behind it is done, which on a busy machine can take longer
// than a status exchange may.
func TestPauseWaitsForTheReconcile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watch.sock")
	ln, err := Listen(path, operator.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	go Serve(t.Context(), ln, Handler{Pause: func(context.Context, PauseChange) (*Pause, error) {
		time.Sleep(ioTimeout + time.Second)
		return nil, nil
	}}, nil)
	if _, err := SendPause(context.Background(), path, "", time.Minute); err != nil {
		t.Errorf("a pause whose reconcile takes %v: %v", ioTimeout+time.Second, err)
	}
}

// TestSocketBoundsAnotherUser: another user (uid 65534) who may ask the
// socket opens a thousand connections and sends nothing, then asks
// faster than the socket answers: the daemon keeps a handful of them
// (SocketLimits.PerPeer), refuses the requests past the rate, and root is
// answered throughout. Needs root to start the other user's process.
func TestSocketBoundsAnotherUser(t *testing.T) {
	if os.Getenv("STATUSAPI_CHILD_SOCKET") != "" {
		t.Skip("the child half runs in TestSocketBoundsAnotherUserChild")
	}
	_, child, path, ln := forAnotherUser(t)
	go Serve(t.Context(), ln, Handler{Status: func(context.Context, Query) Status { return Status{Daemon: Daemon{Running: true}} }}, nil)
	cmd := exec.Command(child, "-test.run=^TestSocketBoundsAnotherUserChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STATUSAPI_CHILD_SOCKET="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// While the child holds what it could keep and floods, root asks.
	var out strings.Builder
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && lines.Text() != "flooded" {
		out.WriteString(lines.Text() + "\n")
	}
	for range 3 {
		if _, err := Fetch(context.Background(), path); err != nil {
			t.Errorf("root's status while another user floods the socket: %v", err)
		}
	}
	stdin.Close()
	io.Copy(&out, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	var open, refused int
	i := strings.Index(out.String(), "open ")
	if i < 0 {
		t.Fatalf("child output:\n%s", out.String())
	}
	if _, err := fmt.Sscanf(out.String()[i:], "open %d refused %d", &open, &refused); err != nil {
		t.Fatalf("child output:\n%s", out.String())
	}
	if open > SocketLimits.PerPeer {
		t.Errorf("the daemon kept %d of another user's 1000 silent connections, want at most %d", open, SocketLimits.PerPeer)
	}
	if refused == 0 {
		t.Errorf("40 requests at once from another user, none refused:\n%s", out.String())
	}
}

// TestSocketBoundsAnotherUserChild is the other user's half.
func TestSocketBoundsAnotherUserChild(t *testing.T) {
	path := os.Getenv("STATUSAPI_CHILD_SOCKET")
	if path == "" {
		t.Skip("started by TestSocketBoundsAnotherUser")
	}
	var conns []net.Conn
	for range 1000 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(500 * time.Millisecond)
	open := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && os.IsTimeout(err) {
			open++
		}
	}
	refused := 0
	for range 40 {
		if _, err := Fetch(context.Background(), path); err != nil && strings.Contains(err.Error(), "too many requests") {
			refused++
		}
	}
	fmt.Printf("open %d refused %d\nflooded\n", open, refused)
	io.ReadAll(os.Stdin)
}
