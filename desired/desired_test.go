// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/controller"
	"github.com/macake/macake/controller/autoqueue"
	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// simple is a policy shaping iface at 100 and 10 Mbit/s; more follows
// its [shaper] keys.
func simple(t *testing.T, name, iface, more string) config.Link {
	return configtest.Parse(t, name, configtest.Policy{Interface: iface, Download: "100mbit", Upload: "10mbit", More: more}.TOML())
}

func up(names ...string) linkfacts.Facts {
	var f linkfacts.Facts
	for _, n := range names {
		f.Interfaces = append(f.Interfaces, linkfacts.InterfaceFacts{Name: n, Up: true})
	}
	return f
}

func slotsOf(d Desire) map[string]int {
	m := map[string]int{}
	for _, l := range d.State.Links {
		m[l.Name] = l.Slot
	}
	return m
}

// TestDesiredSlotsAreStable checks DESIGN §2's promise: adding, removing or
// renaming another link never renumbers a link's pipes, and a link removed
// from the config gives its slot back.
func TestDesiredSlotsAreStable(t *testing.T) {
	a, b, c := simple(t, "a", "en0", ""), simple(t, "b", "en1", ""), simple(t, "c", "en2", "")
	st := &state.State{}
	d, err := Desired([]config.Link{a, b, c}, up("en0", "en1", "en2"), Inputs{State: st}, BackendFacts{})
	if err != nil {
		t.Fatal(err)
	}
	if got := slotsOf(d); !maps.Equal(got, map[string]int{"a": 0, "b": 1, "c": 2}) {
		t.Fatalf("first slots %v", got)
	}
	if len(st.Slots) != 0 {
		t.Fatalf("Desired modified its input state: %v", st.Slots)
	}
	st.Slots = d.Slots

	// b leaves the config, z arrives: a and c keep theirs. b's slot stays
	// in the state file until an apply has removed b's pipes (the slot is
	// what proves they are macake's), so z does not take it yet.
	z := simple(t, "z", "en3", "")
	d, err = Desired([]config.Link{a, c, z}, up("en0", "en2", "en3"), Inputs{State: st}, BackendFacts{})
	if err != nil {
		t.Fatal(err)
	}
	if got := slotsOf(d); !maps.Equal(got, map[string]int{"a": 0, "c": 2, "z": 3}) {
		t.Fatalf("after removing b: %v", got)
	}
	if d.Slots["b"] != 1 || !slices.Equal(d.Released, []string{"b"}) {
		t.Fatalf("b's slot must be kept until released: slots %v, released %v", d.Slots, d.Released)
	}
	st.Slots = d.Slots
	delete(st.Slots, "b") // what state.File.ReleaseSlots does after the apply

	// Once released, the slot is free again.
	y := simple(t, "y", "en4", "")
	d, err = Desired([]config.Link{a, c, z, y}, up("en0", "en2", "en3", "en4"), Inputs{State: st}, BackendFacts{})
	if err != nil || d.Slots["y"] != 1 || len(d.Released) != 0 {
		t.Fatalf("y: slots %v, released %v, %v", d.Slots, d.Released, err)
	}

	// a link whose interface is down keeps its slot while in the config.
	d, err = Desired([]config.Link{a, c, z}, up("en2", "en3"), Inputs{State: st}, BackendFacts{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Slots["a"] != 0 || len(d.State.Links) != 2 {
		t.Fatalf("inactive a: slots %v, shaped %d links", d.Slots, len(d.State.Links))
	}
}

func TestDesiredRunsOutOfSlots(t *testing.T) {
	a, b := simple(t, "a", "en0", ""), simple(t, "b", "en1", "")
	d, err := Desired([]config.Link{a, b}, up("en0", "en1"), Inputs{}, BackendFacts{MaxSlots: 1})
	var le *LinkError
	if !errors.As(err, &le) || le.Link != "b" || !strings.Contains(err.Error(), "no free slot") {
		t.Fatalf("err %v, want a LinkError for b", err)
	}
	if len(d.State.Links) != 1 || d.State.Links[0].Name != "a" {
		t.Fatalf("the other link must still be desired: %+v", d.State.Links)
	}
}

// TestDesiredRateSources checks the order: the controller's rate, then the
// known-good rate (adaptive modes only, within bounds), then the policy.
func TestDesiredRateSources(t *testing.T) {
	mac := config.HardwareAddr{0x74, 0x24, 0x9f, 0, 0, 1}
	facts := linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: true, GatewayMAC: mac}}}
	key := state.ProfileKey("wan", mac.String())
	good := &state.State{Profiles: map[string]state.Profile{key: {GoodDownload: 80_000_000, GoodUpload: 500_000_000}}}
	auto := simple(t, "wan", "en0", "queue = \"64KB\"\n[autorate]\nupload = { min = \"2mbit\", max = \"20mbit\" }\n")
	fixed := simple(t, "wan", "en0", "mode = \"fixed\"\n")
	for _, tc := range []struct {
		name               string
		link               config.Link
		in                 Inputs
		down, upload       int64
		downSrc, uploadSrc RateSource
	}{
		{"policy", auto, Inputs{}, 100_000_000, 10_000_000, FromPolicy, FromPolicy},
		{"known good, clamped to max", auto, Inputs{State: good}, 80_000_000, 20_000_000, FromKnownGood, FromKnownGood},
		{"controller wins", auto, Inputs{State: good, Rates: map[string]Rates{"wan": {Download: 77_000_000}}}, 77_000_000, 20_000_000, FromController, FromKnownGood},
		{"fixed ignores known good", fixed, Inputs{State: good}, 100_000_000, 10_000_000, FromPolicy, FromPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Desired([]config.Link{tc.link}, facts, tc.in, BackendFacts{})
			if err != nil {
				t.Fatal(err)
			}
			a := d.Active[0]
			if a.Download.Pipe.RateBits != tc.down || a.Upload.Pipe.RateBits != tc.upload ||
				a.Download.Source != tc.downSrc || a.Upload.Source != tc.uploadSrc {
				t.Fatalf("download %d (%s), upload %d (%s); want %d (%s), %d (%s)",
					a.Download.Pipe.RateBits, a.Download.Source, a.Upload.Pipe.RateBits, a.Upload.Source,
					tc.down, tc.downSrc, tc.upload, tc.uploadSrc)
			}
			if a.ProfileKey != key {
				t.Fatalf("profile key %q, want %q", a.ProfileKey, key)
			}
		})
	}
}

func TestDesiredQueues(t *testing.T) {
	auto := simple(t, "wan", "en0", "queue = \"auto\"\n")
	fixedQ := simple(t, "wan", "en0", "queue = \"200KB\"\n")
	measured := &state.State{Profiles: map[string]state.Profile{"wan": {IdleRTT: 40 * time.Millisecond}}}

	d, _ := Desired([]config.Link{auto}, up("en0"), Inputs{MTU: map[string]int{"en0": 9000}}, BackendFacts{})
	if got, want := d.State.Links[0].Download.QueueBytes, autoqueue.Bytes(100_000_000, DefaultIdleRTT, 9000); got != want {
		t.Errorf("auto queue without a profile: %d, want %d", got, want)
	}
	d, _ = Desired([]config.Link{auto}, up("en0"), Inputs{State: measured}, BackendFacts{})
	if got, want := d.State.Links[0].Download.QueueBytes, autoqueue.Bytes(100_000_000, 40*time.Millisecond, 1500); got != want {
		t.Errorf("auto queue with a measured idle RTT: %d, want %d", got, want)
	}
	d, _ = Desired([]config.Link{fixedQ}, up("en0"), Inputs{State: measured}, BackendFacts{})
	if got := d.State.Links[0].Upload.QueueBytes; got != 200*1024 {
		t.Errorf("fixed queue: %d, want %d", got, 200*1024)
	}
	// On Linux's bfifo (tc's limits) the auto queue keeps a reserve for
	// sparse packets; a fixed size stays as the policy says.
	linux := BackendFacts{Limits: tc.Limits}
	d, _ = Desired([]config.Link{auto}, up("en0"), Inputs{State: measured}, linux)
	if got, want := d.State.Links[0].Download.QueueBytes, autoqueue.SparseReserve(autoqueue.Bytes(100_000_000, 40*time.Millisecond, 1500), 1500); got != want {
		t.Errorf("auto queue on Linux: %d, want %d (with the sparse reserve)", got, want)
	}
	d, _ = Desired([]config.Link{fixedQ}, up("en0"), Inputs{State: measured}, linux)
	if got := d.State.Links[0].Upload.QueueBytes; got != 200*1024 {
		t.Errorf("fixed queue on Linux: %d, want %d", got, 200*1024)
	}
	d, _ = Desired([]config.Link{auto}, up("en0"), Inputs{State: measured}, BackendFacts{Limits: pfdn.Limits})
	if got, want := d.State.Links[0].Download.QueueBytes, autoqueue.Bytes(100_000_000, 40*time.Millisecond, 1500); got != want {
		t.Errorf("auto queue on macOS: %d, want %d (dummynet has no use for a reserve)", got, want)
	}
}

func TestDesiredModes(t *testing.T) {
	off := simple(t, "off", "en0", "mode = \"off\"\n")
	bal := simple(t, "bal", "en1", "mode = \"balanced\"\n")
	d, err := Desired([]config.Link{off, bal}, up("en0", "en1"), Inputs{}, BackendFacts{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.State.Links) != 0 || len(d.Active) != 2 || d.Active[0].Shaped || d.Active[1].Shaped {
		t.Fatalf("off and idle balanced must install nothing: %+v", d)
	}
	if len(d.Slots) != 0 {
		t.Fatalf("unshaped links took slots: %v", d.Slots)
	}
	if len(d.Warnings) != 1 || d.Warnings[0].Link != "bal" {
		t.Fatalf("want one note for the idle balanced link, got %+v", d.Warnings)
	}
	d, _ = Desired([]config.Link{off, bal}, up("en0", "en1"), Inputs{Engaged: map[string]bool{"bal": true}}, BackendFacts{})
	if len(d.State.Links) != 1 || d.State.Links[0].Name != "bal" {
		t.Fatalf("engaged balanced must be shaped: %+v", d.State.Links)
	}
}

func TestDesiredReflectorsAndCake(t *testing.T) {
	l := simple(t, "wan", "en0", "overhead = 18\n[autorate]\nreflectors = [\"1.1.1.1\", \"tcp:8.8.8.8:443\", \"auto:9.9.9.9:443\"]\nactive_reflectors = 2\n[cake]\ndiffserv = \"diffserv4\"\n")
	d, err := Desired([]config.Link{l}, up("en0"), Inputs{}, BackendFacts{})
	if err != nil {
		t.Fatal(err)
	}
	got := d.State.Links[0]
	want := []shape.Reflector{shape.ICMPReflector(netip.MustParseAddr("1.1.1.1")), {Kind: shape.ProbeTCP, Addr: netip.MustParseAddr("8.8.8.8"), Port: 443}}
	if !reflect.DeepEqual(got.Reflectors, want) {
		t.Errorf("reflectors %v, want the first two %v", got.Reflectors, want)
	}
	if got.Cake == nil || got.Cake.Diffserv != "diffserv4" || got.Cake.Overhead != 18 {
		t.Errorf("cake options %+v", got.Cake)
	}
	// Watch's active set, each reflector exempted as it is probed: the
	// auto one by ICMP until a measurement chose TCP, then by TCP.
	active := map[string][]netip.Addr{"wan": {netip.MustParseAddr("9.9.9.9"), netip.MustParseAddr("8.8.8.8")}}
	for _, c := range []struct {
		kind string
		want string
	}{{"", "[9.9.9.9 tcp:8.8.8.8:443]"}, {"icmp", "[9.9.9.9 tcp:8.8.8.8:443]"}, {"tcp", "[tcp:9.9.9.9:443 tcp:8.8.8.8:443]"}} {
		st := &state.State{Profiles: map[string]state.Profile{"wan": {Link: "wan", ProbeKind: c.kind}}}
		d, _ = Desired([]config.Link{l}, up("en0"), Inputs{State: st, Reflectors: active}, BackendFacts{})
		if got := fmt.Sprint(d.State.Links[0].Reflectors); got != c.want {
			t.Errorf("probe kind %q measured: exemptions %s, want %s", c.kind, got, c.want)
		}
	}
	plain := simple(t, "plain", "en0", "")
	d, _ = Desired([]config.Link{plain}, up("en0"), Inputs{}, BackendFacts{})
	if d.State.Links[0].Cake != nil {
		t.Errorf("a policy without CAKE options got %+v", d.State.Links[0].Cake)
	}
}

func TestPipeRate(t *testing.T) {
	for _, tc := range []struct {
		rate               int64
		overhead, mpu, mtu int
		want               int64
	}{
		{100_000_000, 0, 0, 1500, 100_000_000},
		{22_000_000, 18, 64, 1500, 21_739_000}, // DOCSIS: 22000 × 1500/1518
		{10_000_000, 0, 2000, 1500, 7_500_000}, // MPU above the MTU
		{10_000_000, 44, 0, 0, 9_715_000},      // unknown MTU: 1500
		{1_000, 256, 0, 1500, 1_000},           // never below 1 kbit/s
		{0, 18, 0, 1500, 0},
	} {
		if got := PipeRate(tc.rate, tc.overhead, tc.mpu, tc.mtu); got != tc.want {
			t.Errorf("PipeRate(%d, %d, %d, %d) = %d, want %d", tc.rate, tc.overhead, tc.mpu, tc.mtu, got, tc.want)
		}
	}
}

// TestPipeRateMatchesController pins PipeRate to what a freshly started
// controller sends as its first pipe rate, so a one-shot apply and watch
// never disagree about the same policy.
func TestPipeRateMatchesController(t *testing.T) {
	for _, oh := range []struct{ overhead, mpu int }{{18, 64}, {44, 0}, {0, 96}, {0, 0}} {
		cfg := tuning.DefaultConfig()
		cfg.Overhead, cfg.MPU = oh.overhead, oh.mpu
		c, err := controller.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := c.State()
		for _, d := range shape.Directions {
			ds := s.Direction(d)
			if got := PipeRate(ds.Rate, oh.overhead, oh.mpu, cfg.MTU); got != ds.PipeRate {
				t.Errorf("overhead %d mpu %d %s: PipeRate %d, controller %d", oh.overhead, oh.mpu, d, got, ds.PipeRate)
			}
		}
	}
}

// TestDesiredAdoptsLiveSlots: without slots in the state file, links take
// the slots live on their interfaces (a lost state file renumbers nothing),
// never one another link already holds.
func TestDesiredAdoptsLiveSlots(t *testing.T) {
	a, b, c := simple(t, "a", "en0", ""), simple(t, "b", "en1", ""), simple(t, "c", "en2", "")
	live := map[string]int{"en1": 0, "en2": 4, "en0": 7}
	d, err := Desired([]config.Link{a, b, c}, up("en0", "en1", "en2"), Inputs{}, BackendFacts{LiveSlots: live})
	if err != nil {
		t.Fatal(err)
	}
	if got := slotsOf(d); !maps.Equal(got, map[string]int{"a": 7, "b": 0, "c": 4}) {
		t.Fatalf("slots %v, want the live ones", got)
	}
	st := &state.State{Slots: map[string]int{"a": 0}}
	d, _ = Desired([]config.Link{a, b, c}, up("en0", "en1", "en2"), Inputs{State: st}, BackendFacts{LiveSlots: live, MaxSlots: 5})
	if got := slotsOf(d); !maps.Equal(got, map[string]int{"a": 0, "b": 1, "c": 4}) {
		t.Fatalf("slots %v: a keeps its slot, b cannot adopt a's, c adopts 4", got)
	}
	if !d.AllocatesSlots(st) {
		t.Error("AllocatesSlots must report b and c")
	}
	if d.AllocatesSlots(&state.State{Slots: d.Slots}) {
		t.Error("AllocatesSlots with every slot known")
	}
}

// TestDesiredSkipsForeignSlots: a new link never takes a slot whose pipes
// another tool holds, but a link the state file already gives that slot
// keeps it (the state file is the proof).
func TestDesiredSkipsForeignSlots(t *testing.T) {
	a, b := simple(t, "a", "en0", ""), simple(t, "b", "en1", "")
	d, err := Desired([]config.Link{a, b}, up("en0", "en1"), Inputs{}, BackendFacts{ForeignSlots: map[int]bool{0: true, 2: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := slotsOf(d); !maps.Equal(got, map[string]int{"a": 1, "b": 3}) {
		t.Fatalf("slots %v, want a 1 and b 3", got)
	}
	st := &state.State{Slots: map[string]int{"a": 0}}
	if d, _ := Desired([]config.Link{a}, up("en0"), Inputs{State: st}, BackendFacts{ForeignSlots: map[int]bool{0: true}}); d.Slots["a"] != 0 {
		t.Fatalf("a held slot moved: %v", d.Slots)
	}
	_, err = Desired([]config.Link{a}, up("en0"), Inputs{}, BackendFacts{MaxSlots: 1, ForeignSlots: map[int]bool{0: true}})
	if err == nil || !strings.Contains(err.Error(), "hold pipes macake did not make") {
		t.Fatalf("err %v, want no free slot because of foreign pipes", err)
	}
}

// TestDesiredSaysWhyALinkIsNotShaped: every link that held a slot and
// installs nothing now is listed with the true reason, which the plan then
// shows for removing what it left live (not "removed from config" when its
// file is still there).
func TestDesiredSaysWhyALinkIsNotShaped(t *testing.T) {
	mac := func(s string) config.HardwareAddr {
		var m config.HardwareAddr
		if err := m.UnmarshalText([]byte(s)); err != nil {
			t.Fatal(err)
		}
		return m
	}
	links := []config.Link{
		simple(t, "shaped", "en0", ""),
		simple(t, "down", "en1", ""),
		simple(t, "absent", "en9", ""),
		configtest.Parse(t, "elsewhere", configtest.Policy{Interface: "en2", GatewayMAC: "74:24:9f:00:00:01", Download: "100mbit", Upload: "10mbit"}.TOML()),
		simple(t, "off", "en3", "mode = \"off\"\n"),
		simple(t, "idle", "en4", "mode = \"balanced\"\n"),
		configtest.Parse(t, "winner", configtest.Policy{Interface: "en5", Priority: 10, Download: "100mbit", Upload: "10mbit"}.TOML()),
		simple(t, "loser", "en5", ""),
		simple(t, "new", "en6", "mode = \"off\"\n"),
	}
	facts := up("en0", "en3", "en4", "en5", "en6")
	facts.Interfaces = append(facts.Interfaces,
		linkfacts.InterfaceFacts{Name: "en1"},
		linkfacts.InterfaceFacts{Name: "en2", Up: true, GatewayMAC: mac("a4:91:b1:00:00:02")})
	st := &state.State{Slots: map[string]int{
		"shaped": 0, "down": 1, "absent": 2, "elsewhere": 3, "off": 4, "idle": 5, "winner": 6, "loser": 7, "deleted": 8,
	}}
	d, err := Desired(links, facts, Inputs{State: st}, BackendFacts{})
	if err != nil {
		t.Fatal(err)
	}
	want := []shape.Unshaped{
		{Name: "absent", Interface: "en9", Slot: 2, Reason: "interface en9 not present"},
		{Name: "deleted", Slot: 8, Reason: "policy file removed"},
		{Name: "down", Interface: "en1", Slot: 1, Reason: "interface en1 is down"},
		{Name: "elsewhere", Interface: "en2", Slot: 3, Reason: "no longer matches the network (gateway_mac is a4:91:b1:00:00:02, not 74:24:9f:00:00:01)"},
		{Name: "idle", Interface: "en4", Slot: 5, Reason: `mode = "balanced", and the shaper is not engaged`},
		{Name: "loser", Interface: "en5", Slot: 7, Reason: "outranked by winner (priority 10 > 0)"},
		{Name: "off", Interface: "en3", Slot: 4, Reason: `mode = "off"`},
	}
	if !reflect.DeepEqual(d.State.Unshaped, want) {
		t.Errorf("Unshaped:\n got %+v\nwant %+v", d.State.Unshaped, want)
	}
}

// TestDesiredNamesEveryUnmeasuredDirection: a link whose rates are both
// "auto" on a network not measured yet is one error naming both
// directions, with the command that measures it in the caller's
// directories (issue 27, items 4 and 10).
func TestDesiredNamesEveryUnmeasuredDirection(t *testing.T) {
	for _, tc := range []struct {
		down, up, want string
	}{
		{"auto", "auto", `shaper.download and shaper.upload are "auto"`},
		{"100mbit", "auto", `shaper.upload is "auto"`},
	} {
		l := configtest.Parse(t, "wan", configtest.Policy{Interface: "en0", Download: tc.down, Upload: tc.up}.TOML())
		in := Inputs{Invocation: config.Invocation{ConfigDir: "/x/links.d", StateDir: "/y"}}
		_, err := Desired([]config.Link{l}, up("en0"), in, BackendFacts{})
		var le *LinkError
		var ue *UnmeasuredError
		if !errors.As(err, &le) || !errors.As(err, &ue) || len(reconcileUnjoin(err)) != 1 {
			t.Fatalf("%s/%s: err %v, want one LinkError holding an UnmeasuredError", tc.down, tc.up, err)
		}
		if !errors.Is(err, config.ErrNeedsMeasurement) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), `run "sudo macake --config-dir /x/links.d --state-dir /y measure --link wan" while on it`) {
			t.Errorf("%s/%s: %v", tc.down, tc.up, err)
		}
	}
}

// reconcileUnjoin splits a joined error into its parts.
func reconcileUnjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// TestDesiredPausedLinksInstallNothing: a paused link stays the active
// one on its interface (the policy it outranks does not take over) but
// installs nothing, and the plan's reason for removing what it had is
// the pause; a pause of a policy that is not active changes nothing.
func TestDesiredPausedLinksInstallNothing(t *testing.T) {
	home := configtest.Parse(t, "home", configtest.Policy{Interface: "en0", Priority: 10, Download: "100mbit", Upload: "10mbit"}.TOML())
	spare := simple(t, "spare", "en0", "")
	other := simple(t, "other", "en1", "")
	st := &state.State{Slots: map[string]int{"home": 0, "other": 1}}
	paused := map[string]string{"home": "paused by alice until 15:04:05", "spare": "paused until 15:00:00"}
	d, err := Desired([]config.Link{home, spare, other}, up("en0", "en1"), Inputs{State: st, Paused: paused}, BackendFacts{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.State.Links) != 1 || d.State.Links[0].Name != "other" {
		t.Errorf("shaped: %+v, want other alone", d.State.Links)
	}
	if len(d.Active) != 2 || d.Active[0].Policy.Name != "home" || d.Active[0].Shaped || d.Active[0].Paused != paused["home"] || d.Active[1].Paused != "" {
		t.Errorf("active: %+v", d.Active)
	}
	want := []shape.Unshaped{{Name: "home", Interface: "en0", Slot: 0, Reason: "paused by alice until 15:04:05"}}
	if !reflect.DeepEqual(d.State.Unshaped, want) {
		t.Errorf("Unshaped:\n got %+v\nwant %+v", d.State.Unshaped, want)
	}
	if _, ok := d.Slots["spare"]; ok {
		t.Errorf("the outranked policy got a slot: %v", d.Slots)
	}
}

// TestDesiredDirectionModes: a direction that is off gets the zero pipe
// (installs nothing); a fixed one its rate, never a known-good rate or a
// controller's; both off installs nothing, and says why.
func TestDesiredDirectionModes(t *testing.T) {
	upOnly := simple(t, "up", "en0", "download_mode = \"off\"\n")
	fixedDown := simple(t, "fd", "en1", "download_mode = \"fixed\"\n")
	none := simple(t, "none", "en2", "download_mode = \"off\"\nupload_mode = \"off\"\n")
	st := &state.State{Slots: map[string]int{"none": 5}, Profiles: map[string]state.Profile{"fd": {GoodDownload: 70e6, GoodUpload: 7e6}}}
	in := Inputs{State: st, Rates: map[string]Rates{"fd": {Download: 55e6, Upload: 8e6}}}
	d, err := Desired([]config.Link{upOnly, fixedDown, none}, up("en0", "en1", "en2"), in, BackendFacts{})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := d.State.Link("up")
	if u.Download.Shaped() || !u.Upload.Shaped() || u.Upload.RateBits != 10e6 {
		t.Errorf("upload only: %+v", u)
	}
	f, _ := d.State.Link("fd")
	if f.Download.RateBits != 100e6 || f.Upload.RateBits != 8e6 {
		t.Errorf("fixed download: download %d (want the policy's 100 Mbit/s), upload %d (want the controller's)", f.Download.RateBits, f.Upload.RateBits)
	}
	if _, ok := d.State.Link("none"); ok {
		t.Error("a link with both directions off installs something")
	}
	want := []shape.Unshaped{{Name: "none", Interface: "en2", Slot: 5, Reason: `download_mode and upload_mode are "off"`}}
	if !reflect.DeepEqual(d.State.Unshaped, want) {
		t.Errorf("Unshaped: %+v", d.State.Unshaped)
	}
}
