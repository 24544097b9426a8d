// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/controller/autoqueue"
	"github.com/macake/macake/daemon/sensors"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/syncbuf"
	"github.com/macake/macake/internal/tickgrid"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/metrics"
	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// The tests in this file run the whole daemon in a synctest bubble: the
// in-process pf/dummynet emulator is the Mac, a fake network answers the
// probes and moves the byte counters, and the link facts and policy
// directory events are channels the test feeds. Time is synctest's, so a
// minute of controller activity takes milliseconds and no test sleeps.

const (
	homeMAC  = "74:24:9f:00:00:01"
	hotelMAC = "02:00:00:00:00:02"
)

// fakeNet is the network the fake sensors measure: a bottleneck of the
// given capacity (bit/s) per direction behind the shaper. Traffic fills
// the shaper (load) when busy; while the shaper is faster than the
// bottleneck, the bottleneck's queue adds bloat to every reply.
type fakeNet struct {
	mu    sync.Mutex
	rtt   time.Duration
	bloat time.Duration
	busy  bool
	// silent: no reflector answers; dead: these reflectors never do
	// (each probe to one ends lost, as at the prober's timeout).
	silent bool
	dead   map[netip.Addr]bool
	// phase delays a prober's first send, so its replies fall between the
	// counter readings rather than with them.
	phase    time.Duration
	capacity [2]int64
	rate     func(shape.Direction) int64 // the shaper's live rate
	probes   []*fakeProbe
	// staleReads are counter readings stamped with a time other than
	// when they were taken, by how much.
	staleReads []time.Duration
	// reads are when the counters were read; grids the grids the
	// probers were given.
	reads []time.Time
	grids []tickgrid.Grid
}

func (n *fakeNet) set(f func(n *fakeNet)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n)
}

// Probe implements sensors.Opener.
func (n *fakeNet) Probe(spec sensors.ProbeSpec) (sensors.Probe, error) {
	p := &fakeProbe{net: n, link: spec.Link, iface: spec.Interface, interval: spec.Interval, probes: spec.Probes, out: make(chan probe.Sample, 64)}
	n.mu.Lock()
	n.probes = append(n.probes, p)
	n.grids = append(n.grids, spec.Grid)
	n.mu.Unlock()
	return p, nil
}

// Counters implements sensors.Opener.
func (n *fakeNet) Counters(iface string, interval time.Duration) (sensors.Counters, error) {
	return &fakeCounters{net: n}, nil
}

type fakeProbe struct {
	net      *fakeNet
	link     string
	iface    string // the interface its probes leave by
	interval time.Duration
	probes   []shape.Reflector
	out      chan probe.Sample
	mu       sync.Mutex
	addrs    []netip.Addr
	paused   bool
}

func (p *fakeProbe) SetReflectors(addrs []netip.Addr) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addrs = slices.Clone(addrs)
	return nil
}

func (p *fakeProbe) SetPaused(paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = paused
}

func (p *fakeProbe) Samples() <-chan probe.Sample { return p.out }

func (p *fakeProbe) Run(ctx context.Context) error {
	defer close(p.out)
	p.net.mu.Lock()
	phase := p.net.phase
	p.net.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(phase):
	}
	i := 0
	for {
		p.mu.Lock()
		addrs, paused := p.addrs, p.paused
		p.mu.Unlock()
		step := p.interval
		if len(addrs) > 0 {
			step /= time.Duration(len(addrs))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(step):
		}
		if paused || len(addrs) == 0 {
			continue
		}
		p.net.mu.Lock()
		if p.net.silent {
			p.net.mu.Unlock()
			continue
		}
		if to := addrs[i%len(addrs)]; p.net.dead[to] {
			p.net.mu.Unlock()
			i++
			now := time.Now()
			select {
			case p.out <- probe.Sample{Reflector: to, Kind: probe.KindLost, Method: probe.MethodEcho, Sent: now.Add(-probe.DefaultTimeout)}:
			case <-ctx.Done():
				return nil
			}
			continue
		}
		rtt := p.net.rtt
		if p.net.busy && p.net.rate != nil && p.net.rate(shape.Download) > p.net.capacity[shape.Download] {
			rtt += p.net.bloat
		}
		p.net.mu.Unlock()
		now := time.Now()
		select {
		case p.out <- probe.Sample{Reflector: addrs[i%len(addrs)], Kind: probe.KindReply, Method: probe.MethodEcho, Sent: now.Add(-rtt), Received: now, RTT: rtt}:
		case <-ctx.Done():
			return nil
		}
		i++
	}
}

type fakeCounters struct {
	net  *fakeNet
	k    ifstat.Counters
	last time.Time
}

// Read implements sensors.Counters: while busy, the link has carried what the
// shaper lets through, at most the bottleneck's capacity, since the
// previous reading. A reading stamped with another time than when it is
// taken (say, a ticker's due time after the daemon was held up) would
// give the controller a false rate, so it is recorded as a fault.
func (c *fakeCounters) Read(now time.Time) ifstat.LoadSample {
	c.net.mu.Lock()
	if d := time.Since(now); d != 0 {
		c.net.staleReads = append(c.net.staleReads, d)
	}
	c.net.reads = append(c.net.reads, now)
	if c.net.busy && c.net.rate != nil && !c.last.IsZero() {
		elapsed := int64(now.Sub(c.last))
		down := min(c.net.rate(shape.Download), c.net.capacity[shape.Download])
		up := min(c.net.rate(shape.Upload), c.net.capacity[shape.Upload])
		c.k.RxBytes += uint64(down / 8 * elapsed / int64(time.Second))
		c.k.TxBytes += uint64(up / 8 * elapsed / int64(time.Second))
	}
	c.net.mu.Unlock()
	c.last = now
	return ifstat.LoadSample{At: now, Interface: "en0", Valid: true, Counters: c.k}
}

// fakeFacts is a sensors.FactsWatcher the test drives.
type fakeFacts chan sensors.FactsEvent

func (f fakeFacts) Watch(ctx context.Context) <-chan sensors.FactsEvent { return f }

// rig is a daemon on an emulated Mac.
type rig struct {
	t        *testing.T
	emu      *pfdntest.Emulator
	dir      string
	stateDir string
	facts    fakeFacts
	config   chan struct{}
	net      *fakeNet
	log      *syncbuf.Buffer
	recent   *logging.Recent
	metrics  *metrics.Metrics
	d        *Daemon
	cancel   context.CancelFunc
	done     chan error
	// slowSetRate holds up every pipe update (a dnctl that takes its
	// time) by this long; slowOther every other command (pfctl, the
	// reads, pipe deletions).
	slowSetRate, slowOther atomic.Int64
	// configure changes the daemon's Config at every start.
	configure func(*Config)
}

// slowRunner runs commands on the emulator, pipe updates (or the other
// commands) after a delay.
type slowRunner struct {
	emu          *pfdntest.Emulator
	delay, other *atomic.Int64
}

func (s slowRunner) Run(ctx context.Context, cmd execrun.Command) (execrun.Result, error) {
	d := time.Duration(s.other.Load())
	if strings.Contains(strings.Join(cmd.Argv, " "), " config bw ") {
		d = time.Duration(s.delay.Load())
	}
	if d > 0 {
		time.Sleep(d)
	}
	return s.emu.Run(ctx, cmd)
}

func factsOn(iface, mac string) linkfacts.Facts {
	f := linkfacts.InterfaceFacts{Name: iface, Up: true, GatewayIP: netip.MustParseAddr("192.168.1.1"), Default: true}
	if mac != "" {
		var hw config.HardwareAddr
		if err := hw.UnmarshalText([]byte(mac)); err != nil {
			panic(err)
		}
		f.GatewayMAC = hw
	}
	return linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{f}}
}

// newHomeRig is the rig most tests start from: the autorate link "home"
// on en0 behind homeMAC, no state file.
func newHomeRig(t *testing.T) *rig {
	t.Helper()
	return newRig(t, map[string]string{"home": autorateLink}, nil, factsOn("en0", homeMAC))
}

// newRig writes the policies and the state file, then starts the daemon
// with facts as the network. It must run inside a synctest bubble.
func newRig(t *testing.T, policies map[string]string, st *state.State, facts linkfacts.Facts) *rig {
	t.Helper()
	return newRigOn(t, policies, st, facts, nil)
}

// newRigOn is newRig on a network that net sets up before the daemon
// starts.
func newRigOn(t *testing.T, policies map[string]string, st *state.State, facts linkfacts.Facts, net func(n *fakeNet)) *rig {
	t.Helper()
	return newRigWith(t, policies, st, facts, net, nil)
}

// newRigWith is newRigOn with configure's changes to the daemon's Config.
func newRigWith(t *testing.T, policies map[string]string, st *state.State, facts linkfacts.Facts, net func(n *fakeNet), configure func(*Config)) *rig {
	t.Helper()
	r := &rig{configure: configure,
		t: t, emu: pfdntest.New(), dir: filepath.Join(t.TempDir(), "links.d"), stateDir: t.TempDir(),
		facts: make(fakeFacts, 1), config: make(chan struct{}, 1), log: &syncbuf.Buffer{}, done: make(chan error, 1),
		metrics: metrics.New(metrics.Options{}), recent: logging.NewRecent(50, nil),
	}
	r.net = &fakeNet{rtt: 20 * time.Millisecond, capacity: [2]int64{1_000_000_000, 1_000_000_000}}
	r.net.rate = func(d shape.Direction) int64 { return r.pipeRate(48001 + int(d)) }
	if net != nil {
		net(r.net)
	}
	if err := os.Mkdir(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range policies {
		r.write(name, text)
	}
	if st != nil {
		if err := state.Save(r.stateDir, st); err != nil {
			t.Fatal(err)
		}
	}
	r.start(facts)
	t.Cleanup(func() { r.stop() })
	return r
}

// start starts a daemon on the rig's emulated Mac, directories and state
// file, with facts as the network: at first, and again after stop (a
// restart of macake watch).
func (r *rig) start(facts linkfacts.Facts) {
	t := r.t
	t.Helper()
	loaded, err := state.Load(r.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	tokens := &state.File{Dir: r.stateDir, State: loaded}
	b, err := backend.Open(backend.Config{Store: tokens, Runner: slowRunner{r.emu, &r.slowSetRate, &r.slowOther}, GOOS: "darwin", Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		ConfigDir: r.dir, StateDir: r.stateDir, LoadOptions: config.LoadOptions{SkipOwnershipCheck: true},
		Backend: b, Tokens: tokens, Facts: r.facts, ConfigChanges: r.config, Sensors: r.net, Metrics: r.metrics,
		Log: slog.New(logging.Tee(newTestLogger(r.log).Handler(), r.recent)), LogFile: rigLogFile, Events: r.recent, MTU: func([]string) map[string]int { return nil },
	}
	if r.configure != nil {
		r.configure(&cfg)
	}
	r.d, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.facts <- sensors.FactsEvent{Facts: facts, Reason: "start"}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.d.Run(ctx) }()
	synctest.Wait()
}

// rigLogFile is the log file the rig's daemon says it writes to.
const rigLogFile = "/var/log/macake/watch.log"

func newTestLogger(w *syncbuf.Buffer) *logging.Logger {
	l, err := logging.New(logging.Options{Stderr: w, Level: slog.LevelDebug})
	if err != nil {
		panic(err)
	}
	return l
}

// stop shuts the daemon down (once) and returns Run's error.
func (r *rig) stop() error {
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	r.cancel = nil
	return <-r.done
}

func (r *rig) write(name, text string) {
	r.t.Helper()
	configtest.Write(r.t, r.dir, name, text)
}

// edited tells the daemon that the directory changed and waits until it
// has reconciled.
func (r *rig) edited() {
	r.config <- struct{}{}
	synctest.Wait()
}

// pipeRate returns pipe n's live rate in bit/s, 0 when it does not exist.
func (r *rig) pipeRate(n int) int64 {
	for _, p := range r.emu.Machine().Dummynet.Pipes {
		if int(p.Number) == n {
			return int64(p.Bandwidth)
		}
	}
	return 0
}

func (r *rig) pipes() []int {
	var ns []int
	for _, p := range r.emu.Machine().Dummynet.Pipes {
		ns = append(ns, int(p.Number))
	}
	slices.Sort(ns)
	return ns
}

// anchorRules returns the anchor's dummynet rules.
func (r *rig) anchorRules() []string {
	rs := r.emu.Machine().Rulesets["com.apple/macake"]
	if rs == nil {
		return nil
	}
	var out []string
	for _, rule := range rs.Rules["dummynet"] {
		out = append(out, rule.String())
	}
	return out
}

func (r *rig) mutating() []string {
	var out []string
	for _, c := range r.emu.MutatingCalls() {
		out = append(out, strings.Join(c.Argv[1:], " "))
	}
	return out
}

// sixReflectors are the fake net's reflectors, as a policy names them.
const sixReflectors = `reflectors = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"]` + "\n"

var autorateLink = configtest.Policy{Interface: "en0", GatewayMAC: homeMAC, Download: "80mbit", Upload: "20mbit", More: `[autorate]
download = { min = "10mbit", max = "100mbit" }
upload = { min = "2mbit", max = "30mbit" }
` + sixReflectors}.TOML()

// TestWatchControllerDecisionsAreSinglePipeUpdates: under a bloated
// bottleneck the controller cuts, each decision is exactly one `dnctl
// pipe N config`, and the drift check that follows keeps the controller's
// rate instead of writing the policy's rate back.
func TestWatchControllerDecisionsAreSinglePipeUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		if got := r.pipeRate(48002); got != 80_000_000 {
			t.Fatalf("download pipe at start: %d, want the policy's 80 Mbit/s\n%s", got, r.log)
		}
		if rules := r.anchorRules(); len(rules) == 0 {
			t.Fatalf("no anchor rules after start\n%s", r.log)
		}
		// A 50 Mbit/s bottleneck with a bloated buffer: saturated, every
		// reply is 150 ms late while the shaper is faster than it.
		r.learnThenBloat(150*time.Millisecond, 50_000_000)
		cut := r.pipeRate(48002)
		if cut >= 80_000_000 || cut < 10_000_000 {
			t.Fatalf("download after 20 s of bufferbloat: %d bit/s, want a cut below 80 Mbit/s\n%s", cut, r.log)
		}
		calls := r.mutating()
		if len(calls) == 0 {
			t.Fatal("no rate change reached dummynet")
		}
		for _, c := range calls {
			if !strings.HasPrefix(c, "pipe 4800") || !strings.Contains(c, " config bw ") {
				t.Fatalf("a controller decision ran %q; want only single pipe updates:\n%s", c, strings.Join(calls, "\n"))
			}
		}
		if !strings.Contains(r.log.String(), "event=cut") {
			t.Errorf("no cut logged:\n%s", r.log)
		}

		// The drift checks (every 30 s) find nothing to change: the
		// desired state carries the controller's rate, so the pipe keeps
		// what the controller set, and the checks only read.
		r.emu.ResetCalls()
		time.Sleep(61 * time.Second)
		synctest.Wait()
		reads := 0
		for _, c := range r.emu.Calls() {
			if strings.Join(c.Argv[1:], " ") == "-s info" {
				reads++
			}
		}
		if reads < 2 {
			t.Fatalf("%d drift checks in 61 s, want 2", reads)
		}
		for _, c := range r.mutating() {
			if !strings.HasPrefix(c, "pipe 4800") {
				t.Fatalf("a drift check changed something: %q\n%s", c, r.log)
			}
		}
		if os.Getenv("WATCH_LOG") != "" {
			t.Log(r.log)
		}
		ctl := r.d.Status().Links[0].Controller
		if got, want := r.pipeRate(48002), ctl.Download.PipeRateBits; got != want {
			t.Errorf("download pipe %d bit/s, controller's rate %d: the drift check fought the controller", got, want)
		}
	})
}

// TestWatchProbesEachLinkThroughItsInterface: with two links up, each
// controller's prober is bound to its own link's interface, so that each
// measures its own path and not the default route's (sense/probe's
// namespace test shows the binding at work).
func TestWatchProbesEachLinkThroughItsInterface(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tether := strings.ReplaceAll(autorateLink, `interface = "en0"`, `interface = "en7"`)
		tether = strings.ReplaceAll(tether, "gateway_mac = \""+homeMAC+"\"\n", "")
		facts := factsOn("en0", homeMAC)
		facts.Interfaces = append(facts.Interfaces, linkfacts.InterfaceFacts{Name: "en7", Up: true, GatewayIP: netip.MustParseAddr("172.20.10.1")})
		r := newRig(t, map[string]string{"home": autorateLink, "tether": tether}, nil, facts)
		time.Sleep(time.Second)
		synctest.Wait()
		r.net.mu.Lock()
		got := map[string]string{}
		for _, p := range r.net.probes {
			got[p.link] = p.iface
		}
		r.net.mu.Unlock()
		if want := map[string]string{"home": "en0", "tether": "en7"}; !maps.Equal(got, want) {
			t.Fatalf("probers per link: %v, want each bound to its link's interface %v\n%s", got, want, r.log)
		}
	})
}

// TestWatchReadsCountersWhenItSaysItDoes: a dnctl that takes 1.5 s per
// pipe update holds up the link's goroutine while its counter ticker
// keeps ticking; every reading must still be stamped with when it was
// taken, or the controller sees 1.5 s of bytes over 200 ms.
func TestWatchReadsCountersWhenItSaysItDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		r.slowSetRate.Store(int64(1500 * time.Millisecond))
		r.bloat(150*time.Millisecond, 50_000_000)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if len(r.mutating()) == 0 {
			t.Fatal("no pipe update happened, so nothing was held up")
		}
		r.net.mu.Lock()
		defer r.net.mu.Unlock()
		if n := len(r.net.staleReads); n > 0 {
			t.Errorf("%d counter readings stamped with another time than when taken (first off by %v)", n, r.net.staleReads[0])
		}
	})
}

// TestWatchLinkTimersShareOneGrid: the counter reads after the first,
// the history's steps and the prober's sends are all on the daemon's
// grid, so that those whose periods meet cost one wake-up: each history
// step is at a counter read's instant.
func TestWatchLinkTimersShareOneGrid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		r.net.mu.Lock()
		reads, grids := slices.Clone(r.net.reads), slices.Clone(r.net.grids)
		r.net.mu.Unlock()
		if len(reads) < 20 || len(grids) != 1 || grids[0] != r.d.grid {
			t.Fatalf("%d counter reads, probers given grids %v; want about 25 and the daemon's grid", len(reads), grids)
		}
		at := map[time.Time]bool{}
		for _, read := range reads[1:] {
			if next := r.d.grid.Next(read.Add(-time.Nanosecond), 200*time.Millisecond); !next.Equal(read) {
				t.Errorf("counter read at %v, off the 200 ms grid (its instant: %v)", read, next)
			}
			at[read] = true
		}
		h := r.d.hist.Get("home", time.Time{})
		if len(h) < 3 {
			t.Fatalf("%d history samples in 5 s", len(h))
		}
		for _, s := range h {
			if !at[s.At] {
				t.Errorf("history step at %v, when no counter was read", s.At)
			}
		}
	})
}

var hotelLink = configtest.Policy{Interface: "en0", GatewayMAC: hotelMAC, Download: "20mbit", Upload: "5mbit", More: `[autorate]
download = { min = "2mbit", max = "40mbit" }
upload = { min = "1mbit", max = "10mbit" }
` + sixReflectors}.TOML()

// TestWatchLinkSwitchStartsFromKnownGood: the network changes under a
// running daemon (another gateway on en0): the old link's pipes and rules
// go, the new link's arrive at the known-good rate the state file holds
// for that network, and the old link's controller is replaced by the new
// one's; the old network's last rates are remembered as known-good.
func TestWatchLinkSwitchStartsFromKnownGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &state.State{Profiles: map[string]state.Profile{
			state.ProfileKey("hotel", hotelMAC): {Link: "hotel", GoodDownload: 13_000_000, GoodUpload: 3_000_000},
		}}
		r := newRig(t, map[string]string{"home": autorateLink, "hotel": hotelLink}, st, factsOn("en0", homeMAC))
		// Traffic without bufferbloat: home's rates are proven good.
		r.net.set(func(n *fakeNet) { n.busy = true })
		time.Sleep(5 * time.Second)
		synctest.Wait()
		homeGen := r.d.Status().Links[0]
		if homeGen.Name != "home" || r.pipeRate(48002) == 0 {
			t.Fatalf("home is not shaped: %+v", homeGen)
		}
		homeDown := r.pipeRate(48002)

		r.facts <- sensors.FactsEvent{Facts: factsOn("en0", hotelMAC), Reason: "change"}
		synctest.Wait()
		// hotel got slot 1 (home holds 0): pipes 48003/48004.
		if got := r.pipes(); !slices.Equal(got, []int{48003, 48004}) {
			t.Fatalf("pipes after the switch: %v, want only hotel's 48003 and 48004\n%s", got, r.log)
		}
		if got := r.pipeRate(48004); got != 13_000_000 {
			t.Errorf("hotel's download starts at %d bit/s, want its known-good 13 Mbit/s", got)
		}
		if got := r.pipeRate(48003); got != 3_000_000 {
			t.Errorf("hotel's upload starts at %d bit/s, want its known-good 3 Mbit/s", got)
		}
		for _, rule := range r.anchorRules() {
			if strings.Contains(rule, "pipe 48001") || strings.Contains(rule, "pipe 48002") {
				t.Errorf("home's rule survived the switch: %s", rule)
			}
		}
		s := r.d.Status()
		if len(s.Links) != 1 || s.Links[0].Name != "hotel" || s.Links[0].Controller == nil {
			t.Fatalf("status after the switch: %+v", s.Links)
		}
		if !strings.Contains(r.log.String(), `event=link_change interface=en0 from=home to=hotel reason="gateway `+homeMAC+` -> `+hotelMAC+`"`) {
			t.Errorf("the link change is not logged with its reason:\n%s", r.log)
		}
		saved, _ := state.Load(r.stateDir)
		if p := saved.Profiles[state.ProfileKey("home", homeMAC)]; p.GoodDownload != homeDown {
			t.Errorf("home's known-good download %d, want its last rate %d", p.GoodDownload, homeDown)
		}
	})
}

// TestWatchWakeRebaselines: after the machine slept, every controller
// starts afresh (the samples from before the gap are discarded with it),
// at the rates it had, so the pipes do not move.
func TestWatchWakeRebaselines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		before := r.d.Status().Links[0].Controller
		if before.Responses < 100 {
			t.Fatalf("the controller saw %d replies in 10 s", before.Responses)
		}
		oldGen := r.d.pub.Load().links[0].runner.gen
		up, down := r.pipeRate(48001), r.pipeRate(48002)

		r.facts <- sensors.FactsEvent{Facts: factsOn("en0", homeMAC), Reason: "wake", Woke: true, Slept: 8 * time.Hour}
		synctest.Wait()
		after := r.d.Status().Links[0].Controller
		if gen := r.d.pub.Load().links[0].runner.gen; gen == oldGen {
			t.Fatal("the controller was not restarted after the wake")
		}
		if after.Responses >= before.Responses {
			t.Errorf("the new controller carries %d replies from before the sleep", after.Responses)
		}
		if r.pipeRate(48001) != up || r.pipeRate(48002) != down {
			t.Errorf("the wake moved the pipes: %d/%d -> %d/%d", up, down, r.pipeRate(48001), r.pipeRate(48002))
		}
		if !strings.Contains(r.log.String(), "event=system_wake slept_seconds=28800") {
			t.Errorf("the wake is not logged:\n%s", r.log)
		}
	})
}

var balancedLink = configtest.Policy{Interface: "en0", Mode: "balanced", Download: "40mbit", Upload: "10mbit", More: `[autorate]
download = { min = "5mbit", max = "60mbit" }
upload = { min = "2mbit", max = "20mbit" }
` + sixReflectors + `[balanced]
engage_after = "3s"
release_after = "10s"
`}.TOML()

// TestWatchBalancedEngagesAndReleases: a balanced link installs nothing
// until a standing queue lasts engage_after; then the controller's engage
// makes the daemon install the shaper; once latency stays clean for
// release_after it is removed again.
func TestWatchBalancedEngagesAndReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, map[string]string{"hotspot": balancedLink}, nil, factsOn("en0", ""))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := r.pipes(); len(got) != 0 {
			t.Fatalf("balanced installed %v before any queue", got)
		}
		// No shaper, so the fake net's bottleneck (40 Mbit/s) sees the full
		// load: a standing queue.
		r.net.set(func(n *fakeNet) {
			n.busy, n.bloat = true, 100*time.Millisecond
			n.capacity[shape.Download] = 30_000_000
			n.rate = func(d shape.Direction) int64 {
				if rate := r.pipeRate(48001 + int(d)); rate > 0 {
					return rate
				}
				return 1_000_000_000 // unshaped: the sender fills the bottleneck
			}
		})
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if got := r.pipes(); !slices.Equal(got, []int{48001, 48002}) {
			t.Fatalf("pipes after a standing queue: %v, want 48001 and 48002\n%s", got, r.log)
		}
		if !strings.Contains(r.log.String(), "event=engage") || !strings.Contains(r.log.String(), "trigger=engage result=applied") {
			t.Errorf("the engage is not logged with its reconcile:\n%s", r.log)
		}
		// The load stops: latency clean, the shaper goes.
		r.net.set(func(n *fakeNet) { n.busy = false })
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if got := r.pipes(); len(got) != 0 {
			t.Fatalf("pipes after clean latency: %v, want none\n%s", got, r.log)
		}
		if !strings.Contains(r.log.String(), "trigger=release result=applied") {
			t.Errorf("the release is not logged:\n%s", r.log)
		}
	})
}

// TestWatchKeepsLastGoodPolicy: a file that stops parsing keeps its link
// shaped as before and reports the error with its position; the fix is
// picked up; a new broken file applies nothing; a deleted file removes its
// link.
func TestWatchKeepsLastGoodPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fixed := configtest.Policy{Interface: "en0", Mode: "fixed", Download: "%s", Upload: "5mbit"}.TOML()
		r := newRig(t, map[string]string{"cable": strings.Replace(fixed, "%s", "50mbit", 1)}, nil, factsOn("en0", ""))
		if got := r.pipeRate(48002); got != 50_000_000 {
			t.Fatalf("cable at start: %d", got)
		}
		r.write("cable", strings.Replace(fixed, "%s", "60mbps", 1))
		r.edited()
		if got := r.pipeRate(48002); got != 50_000_000 {
			t.Fatalf("a broken edit changed the pipe to %d; the last good policy must stay", got)
		}
		s := r.d.Status()
		if len(s.ConfigErrors) != 1 || s.ConfigErrors[0].Line != 5 || s.ConfigErrors[0].Kept != "last_good" {
			t.Fatalf("config errors in force: %+v", s.ConfigErrors)
		}
		if !strings.Contains(r.log.String(), "event=config_error") || !strings.Contains(r.log.String(), "kept=last_good") {
			t.Errorf("the error is not logged:\n%s", r.log)
		}
		r.write("cable", strings.Replace(fixed, "%s", "70mbit", 1))
		r.edited()
		if got := r.pipeRate(48002); got != 70_000_000 {
			t.Fatalf("the fix was not applied: %d", got)
		}
		if s := r.d.Status(); len(s.ConfigErrors) != 0 || !strings.Contains(r.log.String(), "event=config_fixed") {
			t.Fatalf("the error is still in force after the fix: %+v", s.ConfigErrors)
		}
		// A new file that never parsed applies nothing for its link.
		r.write("wifi", "[match]\ninterface = \"en1\"\n[shaper]\ndownload = 5\n")
		r.edited()
		if got := r.pipes(); !slices.Equal(got, []int{48001, 48002}) {
			t.Fatalf("pipes with a broken new file: %v", got)
		}
		if s := r.d.Status(); len(s.ConfigErrors) == 0 || s.ConfigErrors[0].Kept != "nothing" {
			t.Fatalf("the new file's error: %+v", s.ConfigErrors)
		}
		// Deleting the file removes the link: that is the user's intent.
		os.Remove(filepath.Join(r.dir, "cable.toml"))
		r.edited()
		if got := r.pipes(); len(got) != 0 || len(r.anchorRules()) != 0 {
			t.Fatalf("the deleted file's link is still shaped: pipes %v, rules %v", got, r.anchorRules())
		}
	})
}

// TestWatchKeepsLastGoodPolicyAcrossRestart: the last good policy
// outlives the daemon. A file broken while watch was stopped (or broken,
// then watch restarted by launchd, an upgrade, a crash) must not tear the
// link's shaping down at the next start: watch falls back to the copy it
// saved when it last accepted the file. Deleting the file still removes
// the link, and the copy with it.
func TestWatchKeepsLastGoodPolicyAcrossRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fixed := configtest.Policy{Interface: "en0", Mode: "fixed", Download: "%s", Upload: "5mbit"}.TOML()
		r := newRig(t, map[string]string{"cable": strings.Replace(fixed, "%s", "50mbit", 1)}, nil, factsOn("en0", ""))
		if got := r.pipeRate(48002); got != 50_000_000 {
			t.Fatalf("cable at start: %d", got)
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		r.write("cable", strings.Replace(fixed, "%s", "180mbps", 1))
		r.start(factsOn("en0", ""))
		if got := r.pipes(); !slices.Equal(got, []int{48001, 48002}) || r.pipeRate(48002) != 50_000_000 || len(r.anchorRules()) == 0 {
			t.Fatalf("after a restart with a broken file: pipes %v, download %d, %d rules; want the last good policy still in force\n%s", got, r.pipeRate(48002), len(r.anchorRules()), r.log)
		}
		s := r.d.Status()
		if len(s.ConfigErrors) != 1 || s.ConfigErrors[0].Line != 5 || s.ConfigErrors[0].Kept != "last_good" {
			t.Fatalf("config errors in force: %+v", s.ConfigErrors)
		}
		if len(s.Links) != 1 || s.Links[0].Name != "cable" {
			t.Fatalf("status links: %+v", s.Links)
		}
		// The fix is picked up as usual.
		r.write("cable", strings.Replace(fixed, "%s", "70mbit", 1))
		r.edited()
		if got := r.pipeRate(48002); got != 70_000_000 {
			t.Fatalf("the fix was not applied: %d", got)
		}
		// A policy directory that cannot be read at start (moved away,
		// say, during an upgrade) keeps every saved policy in force.
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(r.dir, r.dir+".away"); err != nil {
			t.Fatal(err)
		}
		r.start(factsOn("en0", ""))
		if got := r.pipeRate(48002); got != 70_000_000 {
			t.Fatalf("with the policy directory gone at start: download %d, want the saved 70 Mbit/s\n%s", got, r.log)
		}
		if err := os.Rename(r.dir+".away", r.dir); err != nil {
			t.Fatal(err)
		}
		r.edited()
		// Deleted while watch is stopped: the link goes at the next start,
		// and no saved copy brings it back later.
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(r.dir, "cable.toml"))
		r.start(factsOn("en0", ""))
		if got := r.pipes(); len(got) != 0 {
			t.Fatalf("a deleted file's link is still shaped: %v", got)
		}
		r.write("cable", strings.Replace(fixed, "%s", "60mbps", 1))
		r.edited()
		if got := r.pipes(); len(got) != 0 {
			t.Fatalf("a broken file that replaced a deleted one brought back an old copy: pipes %v", got)
		}
	})
}

// TestWatchRepairsDrift: another tool flushes the anchor, deletes a pipe,
// disables pf: the next drift check puts everything back and says what it
// repaired. The hook line going is reported with the line to add, never
// repaired.
func TestWatchRepairsDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fixed := configtest.Policy{Interface: "en0", Mode: "fixed", Download: "50mbit", Upload: "5mbit"}.TOML()
		r := newRig(t, map[string]string{"cable": fixed}, nil, factsOn("en0", ""))
		// The reference is taken again by a new pfctl process: compare the
		// rest.
		snapshot := func() string {
			s := r.emu.Snapshot()
			s.References = nil
			return s.String()
		}
		want := snapshot()
		for _, fault := range []struct {
			name, kind string
			do         func()
		}{
			{"anchor flushed", "rules_missing", func() { r.emu.DeleteAnchor("com.apple/macake") }},
			{"pipe deleted", "shaper_missing", func() { r.emu.DeletePipe(48002) }},
			{"pipe reconfigured", "shaper_changed", func() {
				r.emu.Foreign(context.Background(), "", "/usr/sbin/dnctl", "pipe", "48001", "config", "bw", "1Mbit/s")
			}},
			{"pf disabled", "pf_disabled", func() { r.emu.DisablePF() }},
		} {
			fault.do()
			time.Sleep(DefaultDriftInterval)
			synctest.Wait()
			if got := snapshot(); got != want {
				t.Errorf("%s: not repaired:\n%s\nwant:\n%s", fault.name, got, want)
			}
			if !strings.Contains(r.log.String(), "event=drift_repaired link=cable kind="+fault.kind) && !strings.Contains(r.log.String(), "kind="+fault.kind) {
				t.Errorf("%s: no drift_repaired kind=%s in the log:\n%s", fault.name, fault.kind, r.log)
			}
		}
		if got := r.d.Status().DriftRepairs; got["rules_missing"] != 1 || got["shaper_missing"] != 1 || got["pf_disabled"] != 1 {
			t.Errorf("drift repairs counted: %v", got)
		}

		r.emu.DropHook()
		r.emu.DeleteAnchor("com.apple/macake")
		r.emu.ResetCalls()
		time.Sleep(DefaultDriftInterval)
		synctest.Wait()
		if calls := r.mutating(); len(calls) != 0 {
			t.Errorf("with the hook line gone, watch changed %v; it must apply nothing", calls)
		}
		log := r.log.String()
		if !strings.Contains(log, "event=drift_unrepaired kind=hook_missing") || !strings.Contains(log, `dummynet-anchor \"com.apple/*\"`) {
			t.Errorf("the missing hook is not reported with the line to add:\n%s", log)
		}
		if p := r.d.Status().Problems; len(p) == 0 || !strings.Contains(p[0].Message, `dummynet-anchor "com.apple/*"`) {
			t.Errorf("status problems: %q", p)
		}
		// Once someone restores pf.conf, the next check shapes again.
		r.emu.Foreign(context.Background(), "dummynet-anchor \"com.apple/*\"\nanchor \"com.apple/*\"\n", "/sbin/pfctl", "-f", "-")
		time.Sleep(DefaultDriftInterval)
		synctest.Wait()
		if len(r.anchorRules()) == 0 || len(r.d.Status().Problems) != 0 {
			t.Errorf("after the hook came back: rules %v, problems %q\n%s", r.anchorRules(), r.d.Status().Problems, r.log)
		}
	})
}

// TestWatchShutdown: leaves shaping in place by default and saves the
// state; with TeardownOnExit removes everything macake owns.
func TestWatchShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		r.net.set(func(n *fakeNet) { n.busy = true })
		time.Sleep(5 * time.Second)
		synctest.Wait()
		down := r.pipeRate(48002)
		if down == 80_000_000 {
			t.Fatal("no traffic reached the controller")
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if got := r.pipes(); !slices.Equal(got, []int{48001, 48002}) {
			t.Errorf("pipes after a plain shutdown: %v, want them left in place", got)
		}
		saved, _ := state.Load(r.stateDir)
		if p := saved.Profiles[state.ProfileKey("home", homeMAC)]; p.GoodDownload != down || saved.PFToken == "" {
			t.Errorf("state after shutdown: good download %d (want %d), token %q", p.GoodDownload, down, saved.PFToken)
		}
	})
	// An idle link proves nothing: its known-good rate stays.
	synctest.Test(t, func(t *testing.T) {
		key := state.ProfileKey("home", homeMAC)
		r := newRig(t, map[string]string{"home": autorateLink}, &state.State{Profiles: map[string]state.Profile{key: {Link: "home", GoodDownload: 50_000_000}}}, factsOn("en0", homeMAC))
		if got := r.pipeRate(48002); got != 50_000_000 {
			t.Fatalf("start at %d, want the known-good 50 Mbit/s", got)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		r.stop()
		if saved, _ := state.Load(r.stateDir); saved.Profiles[key].GoodDownload != 50_000_000 {
			t.Errorf("an idle run changed the known-good download to %d", saved.Profiles[key].GoodDownload)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		r.d.cfg.TeardownOnExit = true
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if got := r.pipes(); len(got) != 0 || len(r.anchorRules()) != 0 || r.emu.Snapshot().RefCount != 0 {
			t.Errorf("after --teardown-on-exit: pipes %v, rules %v, %s", got, r.anchorRules(), r.emu.Snapshot())
		}
	})
}

// TestWatchPolicyEditRestartsTheController: an edit of a running
// autorate link restarts its controller; a direction whose rates the edit
// left alone keeps the rate the controller had reached, one whose base
// rate changed starts at the new base at once.
func TestWatchPolicyEditRestartsTheController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		r.net.set(func(n *fakeNet) { n.busy = true }) // no bloat: the rates climb
		time.Sleep(5 * time.Second)
		synctest.Wait()
		r.net.set(func(n *fakeNet) { n.busy = false })
		up, down := r.pipeRate(48001), r.pipeRate(48002)
		if up <= 20_000_000 || down <= 80_000_000 {
			t.Fatalf("the rates did not climb under load: %d/%d", up, down)
		}
		oldGen := r.d.pub.Load().links[0].runner.gen
		r.write("home", strings.Replace(autorateLink, `download = "80mbit"`, `download = "60mbit"`, 1))
		r.edited()
		if gen := r.d.pub.Load().links[0].runner.gen; gen == oldGen {
			t.Fatal("the edit did not restart the controller")
		}
		if got := r.pipeRate(48002); got != 60_000_000 {
			t.Errorf("download after its base rate was edited: %d, want the new base 60 Mbit/s", got)
		}
		if got := r.pipeRate(48001); got != up {
			t.Errorf("upload after an edit that left it alone: %d, want the controller's %d", got, up)
		}
	})
}

// TestWatchMetricsBeforeAReply: a link whose reflectors never answered
// shows no idle delay (NaN, a gap in graphs) rather than the controller's
// starting baseline; its first reply fills it in (issue 12 item 19).
func TestWatchMetricsBeforeAReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		r.net.set(func(n *fakeNet) { n.silent = true })
		time.Sleep(3 * time.Second)
		synctest.Wait()
		m := r.scrape()
		for _, want := range []string{
			`macake_delay_baseline_seconds{direction="download",link="home"} NaN`,
			`macake_delay_baseline_seconds{direction="upload",link="home"} NaN`,
			`macake_delay_delta_seconds{direction="download",link="home"} NaN`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s\n%s", want, grepLines(m, "macake_delay_"))
			}
		}
		r.net.set(func(n *fakeNet) { n.silent = false })
		time.Sleep(3 * time.Second)
		synctest.Wait()
		m = r.scrape()
		if !strings.Contains(m, `macake_delay_baseline_seconds{direction="download",link="home"} 0.`) {
			t.Errorf("after replies the baseline is still unknown:\n%s", grepLines(m, "macake_delay_"))
		}
	})
}

// scrape returns the rig's metrics in the Prometheus text format.
func (r *rig) scrape() string {
	r.t.Helper()
	rec := httptest.NewRecorder()
	r.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// TestWatchMetrics: the daemon feeds the metrics: the shaper rates and
// bounds of each active link, its controller's state, reconciles, drift
// repairs; a link that goes away takes its series with it.
func TestWatchMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		m := r.scrape()
		for _, want := range []string{
			`macake_shaper_rate_bits_per_second{direction="download",link="home"} 8e+07`,
			`macake_shaper_rate_max_bits_per_second{direction="download",link="home"} 1e+08`,
			`macake_controller_state{link="home",state="idle"} 1`,
			`macake_probe_samples_total{link="home",reflector="127.0.0.2"}`,
			`macake_reconciles_total{result="applied"} 1`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s\n%s", want, grepLines(m, "macake_reconciles_total"))
			}
		}
		r.emu.DeletePipe(48001)
		time.Sleep(DefaultDriftInterval)
		synctest.Wait()
		if m := r.scrape(); !strings.Contains(m, `macake_drift_repairs_total{kind="shaper_missing"} 1`) {
			t.Errorf("the drift repair is not counted")
		}
		r.facts <- sensors.FactsEvent{Facts: factsOn("en0", hotelMAC), Reason: "change"}
		synctest.Wait()
		if m := r.scrape(); strings.Contains(m, `link="home"`) || !strings.Contains(m, "macake_link_changes_total 2") {
			t.Errorf("after home went away:\n%s", m)
		}
	})
}

// TestWatchTakesInMeasurements: an "auto" rate needs a measurement; until
// `macake measure` hands one to the daemon (which holds the state lock, so
// measure cannot write the state file itself), the link is not shaped and
// status says why. The daemon saves the measurement, keeps what the
// controller learned, and shapes the link at 95 % of it at once.
func TestWatchTakesInMeasurements(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		auto := strings.Replace(autorateLink, `download = "80mbit"`, `download = "auto"`, 1)
		key := state.ProfileKey("home", homeMAC)
		st := &state.State{Profiles: map[string]state.Profile{key: {Link: "home", GoodUpload: 18_000_000}}}
		r := newRig(t, map[string]string{"home": auto}, st, factsOn("en0", homeMAC))
		if got := r.pipes(); len(got) != 0 {
			t.Fatalf("pipes before any measurement: %v", got)
		}
		if s := r.d.Status(); len(s.Links) != 1 || s.Links[0].Error == nil || !strings.Contains(s.Links[0].Error.Message, "macake measure") {
			t.Fatalf("status does not say that the link needs a measurement: %+v", s.Links)
		}
		m := state.Profile{Link: "home", DownloadCapacity: 90_000_000, UploadCapacity: 20_000_000, IdleRTT: 30 * time.Millisecond, MeasuredAt: time.Now()}
		if err := r.d.TakeMeasurement(t.Context(), key, m); err != nil {
			t.Fatal(err)
		}
		if got := r.pipeRate(48002); got != 85_500_000 {
			t.Fatalf("download right after the measurement: %d, want 95 %% of 90 Mbit/s", got)
		}
		if !strings.Contains(r.log.String(), "took in a measurement") {
			t.Errorf("the measurement is not logged")
		}
		disk, err := state.Load(r.stateDir)
		if err != nil {
			t.Fatal(err)
		}
		if p := disk.Profiles[key]; p.DownloadCapacity != 90_000_000 || p.IdleRTT != 30*time.Millisecond || p.GoodUpload != 18_000_000 {
			t.Errorf("state file profile %+v; want the measurement and the known-good upload", p)
		}
		r.stop()
		if err := r.d.TakeMeasurement(context.Background(), key, m); err == nil || !strings.Contains(err.Error(), "stopping") {
			t.Errorf("a measurement after the daemon stopped: %v", err)
		}
	})
}

// bloat saturates the fake network behind a bloated download
// bottleneck of capacity bit/s: every reply comes delay late.
func (r *rig) bloat(delay time.Duration, capacity int64) {
	r.net.set(func(n *fakeNet) {
		n.busy, n.bloat = true, delay
		n.capacity[shape.Download] = capacity
	})
}

// learnThenBloat leaves the link idle for 10 s, so the controller learns
// the baselines, forgets the calls so far, then bloats the network
// (bloat) for 20 s.
func (r *rig) learnThenBloat(delay time.Duration, capacity int64) {
	time.Sleep(10 * time.Second)
	synctest.Wait()
	r.emu.ResetCalls()
	r.bloat(delay, capacity)
	time.Sleep(20 * time.Second)
	synctest.Wait()
}

// grepLines returns the lines of s that contain substr.
func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestWatchProbesAutoReflectorsAsMeasured: auto reflectors are probed
// with ICMP until a measurement finds that only TCP sees the link's
// bloat; handed that measurement, watch restarts the controller with a
// prober that sends TCP handshakes to the reflectors' port, and the pf
// anchor exempts TCP to and from that port instead of ICMP.
func TestWatchProbesAutoReflectorsAsMeasured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		auto := strings.Replace(autorateLink, `reflectors = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"]`,
			`reflectors = ["auto:127.0.0.2:443", "auto:127.0.0.3:443", "127.0.0.4", "127.0.0.5", "127.0.0.6", "udp:127.0.0.7:7"]`, 1)
		r := newRig(t, map[string]string{"home": auto}, nil, factsOn("en0", homeMAC))
		kinds := func() map[string]bool {
			r.net.mu.Lock()
			defer r.net.mu.Unlock()
			p := r.net.probes[len(r.net.probes)-1]
			out := map[string]bool{}
			for _, pr := range p.probes {
				out[pr.String()] = true
			}
			return out
		}
		before := kinds()
		if !before["127.0.0.2"] || !before["udp:127.0.0.7:7"] || before["tcp:127.0.0.2:443"] {
			t.Fatalf("before any measurement the prober probes %v: want the auto reflectors by ICMP", before)
		}
		if rules := strings.Join(r.anchorRules(), "\n"); !strings.Contains(rules, "proto icmp from any to 127.0.0.2") || !strings.Contains(rules, "proto udp from any to 127.0.0.7 port = 7") {
			t.Fatalf("anchor before the measurement:\n%s", rules)
		}
		key := state.ProfileKey("home", homeMAC)
		m := state.Profile{Link: "home", DownloadCapacity: 90_000_000, UploadCapacity: 20_000_000, MeasuredAt: time.Now(), ProbeKind: "tcp"}
		if err := r.d.TakeMeasurement(t.Context(), key, m); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		after := kinds()
		if !after["tcp:127.0.0.2:443"] || !after["tcp:127.0.0.3:443"] || !after["127.0.0.4"] || !after["udp:127.0.0.7:7"] {
			t.Errorf("after the measurement the prober probes %v: want the auto reflectors by TCP, the others as they were", after)
		}
		rules := strings.Join(r.anchorRules(), "\n")
		for _, want := range []string{"inet proto tcp from any to 127.0.0.2 port = 443", "inet proto tcp from 127.0.0.3 port = 443 to any", "inet proto icmp from any to 127.0.0.4"} {
			if !strings.Contains(rules, want) {
				t.Errorf("anchor lacks %q:\n%s", want, rules)
			}
		}
		if strings.Contains(rules, "proto icmp from any to 127.0.0.2") {
			t.Errorf("the anchor still exempts the auto reflector's ICMP:\n%s", rules)
		}
		// status says how each reflector is probed.
		st := r.d.Status()
		probes := map[string]string{}
		for _, rs := range st.Links[0].Controller.Reflectors {
			probes[rs.Address] = fmt.Sprintf("%s/%d", rs.Probe, rs.Port)
		}
		if probes["127.0.0.2"] != "tcp/443" || probes["127.0.0.4"] != "icmp/0" || probes["127.0.0.7"] != "udp/7" {
			t.Errorf("status shows the reflectors probed as %v", probes)
		}
		var text strings.Builder
		statusapi.WriteText(&text, st, statusapi.TextOptions{})
		if !strings.Contains(text.String(), "reflector 127.0.0.2 tcp/443") {
			t.Errorf("status text does not say how the reflector is probed:\n%s", text.String())
		}
	})
}

// TestWatchRepairsSoonAfterAFailedRateChange: a rate change whose dnctl
// fails, hangs (until the command timeout) or dies after doing its work
// puts the live state in doubt; a pass reads it and repairs within
// seconds, not at the next drift tick, the pipe ends at the controller's
// rate, and the error is logged once, with its cause.
func TestWatchRepairsSoonAfterAFailedRateChange(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault pfdntest.Fault
		cause string
	}{
		{"fails", pfdntest.Fault{Kind: pfdntest.Fail, ExitCode: 65, Stderr: "dnctl: injected\n"}, "dnctl: injected"},
		{"hangs", pfdntest.Fault{Kind: pfdntest.Hang}, "timed out"},
		{"dies", pfdntest.Fault{Kind: pfdntest.Kill}, "killed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newHomeRig(t)
				time.Sleep(10 * time.Second)
				synctest.Wait()
				fault := c.fault
				fault.Match, fault.Nth = `^dnctl pipe 48002 config`, 2
				if err := r.emu.AddFault(fault); err != nil {
					t.Fatal(err)
				}
				r.emu.ResetCalls()
				r.bloat(150*time.Millisecond, 50_000_000)
				// Long before the next drift tick (30 s after the last),
				// and past a hung dnctl's 10 s timeout.
				time.Sleep(15 * time.Second)
				synctest.Wait()
				failed, readAfter := false, false
				for _, call := range r.emu.Calls() {
					line := strings.Join(call.Argv[1:], " ")
					if call.Fault != "" {
						failed = true
					}
					if failed && line == "-s info" {
						readAfter = true
					}
				}
				if !failed {
					t.Fatalf("the fault never fired:\n%s", r.log)
				}
				if !readAfter {
					t.Fatalf("no pass read the live state after the failed rate change:\n%s", r.log)
				}
				var logged []string
				for _, line := range strings.Split(r.log.String(), "\n") {
					// Only the warning: until the repair, the decisions that
					// find the shaper in doubt are logged at debug level.
					if strings.Contains(line, "setting a rate failed") && !strings.Contains(line, "level=DEBUG") {
						logged = append(logged, line)
					}
				}
				if len(logged) != 1 || !strings.Contains(logged[0], c.cause) {
					t.Errorf("the failure is logged %d times, want once with its cause %q:\n%s", len(logged), c.cause, strings.Join(logged, "\n"))
				}
				r.net.set(func(n *fakeNet) { n.busy, n.bloat = false, 0 })
				time.Sleep(2 * time.Second)
				synctest.Wait()
				ctl := r.d.Status().Links[0].Controller
				if got, want := r.pipeRate(48002), ctl.Download.PipeRateBits; got != want {
					t.Errorf("download pipe %d bit/s after the repair, controller's rate %d\n%s", got, want, r.log)
				}
			})
		})
	}
}

// TestWatchSizesAutoQueueBeforeTheFirstLoad: on an idle link no rate
// changes and the first drift check is 30 s away; the queue still follows
// the measured 2 ms path within seconds, so the first download meets it
// rather than DefaultIdleRTT's 20 ms of drain.
func TestWatchSizesAutoQueueBeforeTheFirstLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		r.net.set(func(n *fakeNet) { n.rtt = 2 * time.Millisecond })
		start := r.pipeRate(48002)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if rate := r.pipeRate(48002); rate != start {
			t.Fatalf("the idle link's rate moved from %d to %d bit/s; the test wants a link no rate change resizes", start, rate)
		}
		var got int64
		for _, p := range r.emu.Machine().Dummynet.Pipes {
			if p.Number == 48002 {
				got = int64(p.FS.QSize)
			}
		}
		if want := autoqueue.Bytes(start, 2*time.Millisecond, 1500); got != want {
			t.Errorf("download queue 5 s into an idle 2 ms path: %d bytes, want %d\n%s", got, want, r.log)
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestWatchSizesAutoQueueFromTheIdleRTTItMeasures: on a network without a
// measured idle RTT, an auto queue starts sized for DefaultIdleRTT (20 ms
// of drain); once the controller has measured a 2 ms path, watch records
// it in the network's profile and resizes the queues from it (the 5 ms
// floor at the rate), and the state file keeps it after watch stops.
func TestWatchSizesAutoQueueFromTheIdleRTTItMeasures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		queue := func(n int) int64 {
			for _, p := range r.emu.Machine().Dummynet.Pipes {
				if int(p.Number) == n {
					return int64(p.FS.QSize)
				}
			}
			return 0
		}
		if got, want := queue(48002), autoqueue.Bytes(80_000_000, desired.DefaultIdleRTT, 1500); got != want {
			t.Fatalf("download queue at start %d bytes, want %d (DefaultIdleRTT)", got, want)
		}
		r.net.set(func(n *fakeNet) { n.rtt, n.busy = 2*time.Millisecond, true })
		// A rate change records the idle RTT as soon as the controller
		// has a few replies, long before the first drift check (30 s).
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if !strings.Contains(r.log.String(), "measured the idle RTT") {
			t.Errorf("5 s into a loaded link the idle RTT is not recorded yet:\n%s", r.log)
		}
		// The rates reach their maximum within seconds and stay: the
		// next drift check installs the queue that goes with it.
		time.Sleep(56 * time.Second)
		synctest.Wait()
		rate := r.pipeRate(48002)
		if got, want := queue(48002), autoqueue.Bytes(rate, 2*time.Millisecond, 1500); got != want {
			t.Errorf("download queue after 61 s on a 2 ms path: %d bytes at %d bit/s, want %d\n%s", got, rate, want, r.log)
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		saved, _ := state.Load(r.stateDir)
		if got := saved.Profiles[state.ProfileKey("home", homeMAC)].IdleRTT; got < time.Millisecond || got > 3*time.Millisecond {
			t.Errorf("idle RTT in the state file after stop: %v, want about 2 ms", got)
		}
	})
}

// TestIdleRTTAskBacksOff: the runner asks the owner to learn the idle RTT
// at 20 replies and, in case the controller counted fewer, at 40, 80, 160
// and 320, and then no more.
func TestIdleRTTAskBacksOff(t *testing.T) {
	var asked []int
	for n := 1; n <= 2000; n++ {
		if idleRTTAsk(n) {
			asked = append(asked, n)
		}
	}
	if want := []int{20, 40, 80, 160, 320}; !slices.Equal(asked, want) {
		t.Errorf("asked at replies %v, want %v", asked, want)
	}
}
