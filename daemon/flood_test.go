// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/config"
	"github.com/macake/macake/daemon/sensors"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/daemon/statuspage"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/syncbuf"
	"github.com/macake/macake/metrics"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// fdRunner runs commands on the emulator, each holding a file descriptor
// while it runs, as a real process's pipes do: with the descriptors gone,
// watch can run no tc, dnctl or pfctl.
type fdRunner struct{ emu *pfdntest.Emulator }

func (f fdRunner) Run(ctx context.Context, cmd execrun.Command) (execrun.Result, error) {
	fd, err := os.Open(os.DevNull)
	if err != nil {
		return execrun.Result{}, fmt.Errorf("starting %s: %w", cmd.Argv[0], err)
	}
	defer fd.Close()
	return f.emu.Run(ctx, cmd)
}

// TestWatchHoldsUpUnderAConnectionFlood: another process opens 2,000
// connections to each of the status page and the metrics endpoint and
// keeps asking for /api/status, while watch runs with 512 file
// descriptors. The controller keeps taking its samples at its pace, a
// deleted pipe is put back at the next drift check, and root's status
// request over the socket and a new page request are answered. Before
// the endpoints had bounds, the flood took every descriptor: no drift
// repair, no answer (issue 27).
func TestWatchHoldsUpUnderAConnectionFlood(t *testing.T) {
	if os.Getenv("MACAKE_FLOOD_ADDRS") != "" {
		t.Skip("the flooding half runs in TestWatchHoldsUpUnderAConnectionFloodChild")
	}
	if testing.Short() {
		t.Skip("holds thousands of connections for seconds")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = 512
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) })

	emu := pfdntest.New()
	dir, stateDir := filepath.Join(t.TempDir(), "links.d"), t.TempDir()
	os.Mkdir(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "home.toml"), []byte(autorateLink), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := &state.File{Dir: stateDir, State: &state.State{}}
	b, err := backend.Open(backend.Config{Store: tokens, Runner: fdRunner{emu}, GOOS: "darwin", Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	net := &fakeNet{rtt: 2 * time.Millisecond, capacity: [2]int64{1e9, 1e9}}
	facts := make(fakeFacts, 1)
	facts <- sensors.FactsEvent{Facts: factsOn("en0", homeMAC), Reason: "start"}
	logBuf := &syncbuf.Buffer{}
	log := slog.New(newTestLogger(logBuf).Handler())
	m := metrics.New(metrics.Options{})
	d, err := New(Config{
		ConfigDir: dir, StateDir: stateDir, LoadOptions: config.LoadOptions{SkipOwnershipCheck: true},
		Backend: b, Tokens: tokens, Facts: facts, Sensors: net, Metrics: m, Log: log,
		DriftInterval: time.Second, MTU: func([]string) map[string]int { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	net.rate = func(dir shape.Direction) int64 { return 80_000_000 }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	// The endpoints as Serve starts them.
	pageLn, err := statuspage.Endpoint.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go statuspage.Endpoint.Serve(ctx, pageLn, statuspage.Handler(statuspage.Options{Status: d.Query}), nil)
	metricsLn, err := metrics.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go m.ServeListener(ctx, metricsLn)
	socket := statusapi.SocketPath(stateDir)
	go serveStatus(ctx, socket, statusapi.Handler{Status: d.Query}, log, time.Second)

	// Wait for the shaping and the controller.
	deadline := time.Now().Add(10 * time.Second)
	for len(emu.Machine().Dummynet.Pipes) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("watch did not start shaping:\n%s", logBuf)
		}
		time.Sleep(50 * time.Millisecond)
	}

	child := exec.Command(os.Args[0], "-test.run=^TestWatchHoldsUpUnderAConnectionFloodChild$", "-test.count=1")
	child.Env = append(os.Environ(), "MACAKE_FLOOD_ADDRS="+pageLn.Addr().String()+","+metricsLn.Addr().String())
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		child.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && lines.Text() != "holding" {
		t.Log("flood:", lines.Text())
	}

	// The controller's inputs keep coming at their pace: 20 replies a
	// second.
	samples := func() uint64 {
		st := d.Status()
		if len(st.Links) == 0 || st.Links[0].Controller == nil {
			return 0
		}
		return st.Links[0].Controller.Responses
	}
	before := samples()
	time.Sleep(3 * time.Second)
	if got := samples() - before; got < 20 {
		t.Errorf("%d replies reached the controller in 3 s of flood, want about 60 (20 a second)", got)
	}
	// Someone deletes a pipe: the next drift check puts it back.
	emu.DeletePipe(48002)
	deadline = time.Now().Add(5 * time.Second)
	for !hasPipe(emu, 48002) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !hasPipe(emu, 48002) {
		t.Errorf("a deleted pipe was not put back within 5 s of flood:\n%s", logBuf)
	}
	// Root is answered on the socket, and a new client by the page.
	qctx, qcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer qcancel()
	if _, err := statusapi.Fetch(qctx, socket); err != nil {
		t.Errorf("status over the socket during the flood: %v", err)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + pageLn.Addr().String() + "/")
	if err != nil {
		t.Errorf("a new page request during the flood: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != 200 && resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("a new page request during the flood: %s", resp.Status)
		}
	}
}

func hasPipe(emu *pfdntest.Emulator, n int) bool {
	for _, p := range emu.Machine().Dummynet.Pipes {
		if int(p.Number) == n {
			return true
		}
	}
	return false
}

// TestWatchHoldsUpUnderAConnectionFloodChild is the flood: 2,000
// connections to each address (a request on every tenth, then idle), and
// a loop asking for /api/status until its standard input closes.
func TestWatchHoldsUpUnderAConnectionFloodChild(t *testing.T) {
	addrs := os.Getenv("MACAKE_FLOOD_ADDRS")
	if addrs == "" {
		t.Skip("started by TestWatchHoldsUpUnderAConnectionFlood")
	}
	var held []net.Conn
	for _, addr := range strings.Split(addrs, ",") {
		for i := range 2000 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				fmt.Println("dial:", err)
				break
			}
			if i%10 == 0 {
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
			}
			held = append(held, c)
		}
	}
	fmt.Println(len(held), "connections")
	fmt.Println("holding")
	stop := make(chan struct{})
	go func() {
		io.ReadAll(os.Stdin)
		close(stop)
	}()
	page := strings.Split(addrs, ",")[0]
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-stop:
			return
		default:
		}
		if resp, err := client.Get("http://" + page + "/api/status"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}
