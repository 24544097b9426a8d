// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/config"
)

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestAssemble(t *testing.T) {
	ifaces := []osInterface{
		{Index: 1, Name: "lo0", Up: true, Loopback: true},
		{Index: 4, Name: "en0", Up: true},
		{Index: 5, Name: "en1", Up: true},
		{Index: 9, Name: "utun3", Up: true},
		{Index: 7, Name: "en5", Up: false},
	}
	for _, tc := range []struct {
		name   string
		routes []osRoute
		neigh  []osNeighbor
		want   string
	}{
		{
			// macOS: en0 is the primary service; en1 (say, a USB
			// Ethernet) has only an interface-scoped default.
			name: "darwin primary plus a scoped default",
			routes: []osRoute{
				{Index: 5, Gateway: ip("10.0.0.1"), Scoped: true},
				{Index: 4, Gateway: ip("192.168.1.1")},
				{Index: 4, Gateway: ip("192.168.1.1"), Scoped: true},
			},
			neigh: []osNeighbor{
				{Index: 4, IP: ip("192.168.1.1"), MAC: mac("74:24:9f:00:00:01")},
				{Index: 5, IP: ip("10.0.0.1"), MAC: mac("00:00:00:00:00:00")},    // incomplete
				{Index: 5, IP: ip("192.168.1.1"), MAC: mac("aa:aa:aa:aa:aa:aa")}, // same IP, other interface
			},
			want: "en0 up gw 192.168.1.1 (74:24:9f:00:00:01) default; en1 up gw 10.0.0.1; en5 down; utun3 up",
		},
		{
			name: "linux metrics pick the default",
			routes: []osRoute{
				{Index: 4, Gateway: ip("192.168.1.1"), Metric: 600},
				{Index: 5, Gateway: ip("10.0.0.1"), Metric: 100},
			},
			want: "en0 up gw 192.168.1.1; en1 up gw 10.0.0.1 default; en5 down; utun3 up",
		},
		{
			name: "IPv4 preferred over IPv6; IPv6-only gateway without zone",
			routes: []osRoute{
				{Index: 4, Gateway: ip("fe80::1%en0")},
				{Index: 4, Gateway: ip("192.168.1.1"), Metric: 1000},
				{Index: 5, Gateway: ip("fe80::2%en1"), Metric: 1},
			},
			neigh: []osNeighbor{{Index: 5, IP: ip("fe80::2"), MAC: mac("02:00:00:00:00:02")}},
			want:  "en0 up gw 192.168.1.1 default; en1 up gw fe80::2 (02:00:00:00:00:02); en5 down; utun3 up",
		},
		{
			// PPPoE or WireGuard: the default goes out of a device with
			// no next hop. It is the default all the same (measure --link
			// and the default-route checks depend on it); a gateway route
			// elsewhere with a worse metric does not win.
			name: "device-only default",
			routes: []osRoute{
				{Index: 9, IPv4: true, Metric: 50},
				{Index: 4, Gateway: ip("192.168.1.1"), Metric: 600},
			},
			want: "en0 up gw 192.168.1.1; en1 up; en5 down; utun3 up default",
		},
		{
			name: "no default route",
			want: "en0 up; en1 up; en5 down; utun3 up",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Describe(assemble(ifaces, tc.routes, tc.neigh, nil))
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// nl builds one netlink message.
func nl(typ uint16, seq uint32, body []byte) []byte {
	b := make([]byte, nlmsgHdrLen, nlmsgHdrLen+len(body)+3)
	binary.NativeEndian.PutUint32(b, uint32(nlmsgHdrLen+len(body)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint32(b[8:], seq)
	b = append(b, body...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func attr(typ uint16, v []byte) []byte {
	b := make([]byte, 4, 4+len(v)+3)
	binary.NativeEndian.PutUint16(b, uint16(4+len(v)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func linkMsg(index int32, name string, flags uint32) []byte {
	b := make([]byte, 16)
	binary.NativeEndian.PutUint32(b[4:], uint32(index))
	binary.NativeEndian.PutUint32(b[8:], flags)
	return append(b, attr(iflaIfname, append([]byte(name), 0))...)
}

func routeMsg(family, dstLen byte, table byte, gw []byte, oif uint32, prio uint32) []byte {
	b := []byte{family, dstLen, 0, 0, table, 4, 0, rtnUnicast, 0, 0, 0, 0}
	if gw != nil {
		b = append(b, attr(rtaGateway, gw)...)
	}
	b = append(b, attr(rtaOif, u32(oif))...)
	return append(b, attr(rtaPriority, u32(prio))...)
}

func neighMsg(family byte, index int32, state uint16, dst, lladdr []byte) []byte {
	b := make([]byte, 12)
	b[0] = family
	binary.NativeEndian.PutUint32(b[4:], uint32(index))
	binary.NativeEndian.PutUint16(b[8:], state)
	b = append(b, attr(ndaDst, dst)...)
	if lladdr != nil {
		b = append(b, attr(ndaLladdr, lladdr)...)
	}
	return b
}

func recordedDump() []byte {
	var b []byte
	b = append(b, nl(rtmNewLink, 7, linkMsg(1, "lo", iffUp|iffRunning|iffLoopback))...)
	b = append(b, nl(rtmNewLink, 7, linkMsg(2, "eth0", iffUp|iffRunning|iffLowerUp))...)
	b = append(b, nl(rtmNewLink, 7, linkMsg(3, "wlan0", iffUp))...) // up, no carrier
	b = append(b, nl(rtmNewRoute, 7, routeMsg(2, 0, rtTableMain, []byte{10, 9, 0, 1}, 2, 100))...)
	b = append(b, nl(rtmNewRoute, 7, routeMsg(2, 24, rtTableMain, nil, 2, 0))...)        // a subnet route
	b = append(b, nl(rtmNewRoute, 7, routeMsg(2, 0, 255, []byte{10, 9, 0, 9}, 2, 0))...) // local table
	b = append(b, nl(rtmNewNeigh, 7, neighMsg(2, 2, 0x02, []byte{10, 9, 0, 1}, mac("fa:83:83:7c:ea:d0")))...)
	b = append(b, nl(rtmNewNeigh, 7, neighMsg(2, 2, nudFailed, []byte{10, 9, 0, 7}, nil))...)
	b = append(b, nl(rtmNewRoute, 6, routeMsg(2, 0, rtTableMain, []byte{1, 1, 1, 1}, 2, 1))...) // stale sequence
	b = append(b, nl(nlmsgDone, 7, u32(0))...)
	return b
}

func TestNetlinkDumpParsing(t *testing.T) {
	var d netlinkDump
	done, err := d.add(recordedDump(), 7)
	if err != nil || !done {
		t.Fatalf("done=%v err=%v", done, err)
	}
	got := Describe(assemble(d.ifaces, d.routes, d.neigh, nil))
	want := "eth0 up gw 10.9.0.1 (fa:83:83:7c:ea:d0) default; wlan0 down"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// An error reply ends the dump with the errno.
	var d2 netlinkDump
	if _, err := d2.add(nl(nlmsgError, 1, u32(uint32(0xffffffff-12))), 1); err == nil || !strings.Contains(err.Error(), "13") {
		t.Errorf("error reply: %v", err)
	}
	for _, bad := range [][]byte{recordedDump()[:30], {1, 2, 3}} {
		var d3 netlinkDump
		if _, err := d3.add(bad, 7); err == nil {
			t.Errorf("truncated dump accepted")
		}
	}
}

func FuzzNetlinkDump(f *testing.F) {
	f.Add(recordedDump())
	f.Add(nl(rtmNewRoute, 7, []byte{2, 0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d netlinkDump
		d.add(b, 7)
	})
}

func TestSSIDParsers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func(string) string
		out   string
		want  string
	}{
		{"ipconfig 15.5", parseIPConfigSummary, "<dictionary> {\n  BSSID : 74:24:9f:00:00:02\n  SSID : STARLINK\n  Security : WPA3_SAE\n}", "STARLINK"},
		{"ipconfig 15.6 redacts", parseIPConfigSummary, "<dictionary> {\n  SSID : <redacted>\n}", ""},
		{"ipconfig on Ethernet", parseIPConfigSummary, "<dictionary> {\n  InterfaceType : Ethernet\n}", ""},
		{"networksetup 14", parseAirportNetwork, "Current Wi-Fi Network: Hotel Guest\n", "Hotel Guest"},
		{"networksetup 15", parseAirportNetwork, "You are not associated with an AirPort network.\n", ""},
		{"iw connected", parseIwLink, "Connected to 74:24:9f:00:00:02 (on wlan0)\n\tSSID: home net\n\tfreq: 5180\n", "home net"},
		{"iw not connected", parseIwLink, "Not connected.\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.parse(tc.out); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	ports := "Hardware Port: Ethernet\nDevice: en5\nEthernet Address: x\n\nHardware Port: Wi-Fi\nDevice: en0\nEthernet Address: y\n"
	if got := parseHardwarePorts(ports); len(got) != 1 || got[0] != "en0" {
		t.Errorf("Wi-Fi devices %v, want [en0]", got)
	}
}

func FuzzSSIDParsers(f *testing.F) {
	f.Add("  SSID : x\n")
	f.Add("Current Wi-Fi Network: y")
	f.Add("Hardware Port: Wi-Fi\nDevice: en0\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, v := range []string{parseIPConfigSummary(s), parseAirportNetwork(s), parseIwLink(s)} {
			if v == "<redacted>" || strings.ContainsAny(v, "\n") {
				t.Fatalf("unusable SSID %q accepted", v)
			}
		}
		parseHardwarePorts(s)
	})
}

func TestParseFacts(t *testing.T) {
	good := `{"interfaces":[{"name":"en1","up":false},{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9F:00:00:01","ssid":"STARLINK"}]}`
	f, err := ParseFacts([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := Describe(f); got != "en1 down; en0 up gw 192.168.1.1 (74:24:9f:00:00:01) ssid STARLINK default" {
		t.Errorf("got %s", got)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"interfaces":[{"name":"en0","colour":"red"}]}`, `unknown field "colour"`},
		{"{\"interfaces\":[\n  {\"name\":\"en0\",}]}", "2:17"},
		{`{"interfaces":[{"name":""}]}`, "name is empty"},
		{`{"interfaces":[{"name":"en0"},{"name":"en0"}]}`, "listed twice"},
		{`{"interfaces":[{"name":"en0","gateway_mac":"zz"}]}`, "invalid MAC"},
		{`{"interfaces":[]} {}`, "after the JSON object"},
	} {
		if _, err := ParseFacts([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFacts(%s) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	src := &FileSource{Path: filepath.Join(t.TempDir(), "missing.json")}
	if _, err := src.Facts(context.Background()); err == nil || !strings.Contains(err.Error(), EnvFile+"=") {
		t.Errorf("missing file: %v", err)
	}
}

func TestFromEnvPrefersTheFile(t *testing.T) {
	src, err := FromEnv(func(k string) string {
		if k == EnvFile {
			return "/tmp/facts.json"
		}
		return ""
	}, SystemOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fs, ok := src.(*FileSource); !ok || fs.Path != "/tmp/facts.json" {
		t.Errorf("source %#v", src)
	}
}

// fakeSource is a Source and Notifier under the test's control.
type fakeSource struct {
	mu     sync.Mutex
	facts  Facts
	err    error
	reads  int
	events chan struct{}
}

func (f *fakeSource) Facts(context.Context) (Facts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.facts, f.err
}

func (f *fakeSource) Changes(context.Context) (<-chan struct{}, error) { return f.events, nil }

func (f *fakeSource) set(desc string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
	f.facts = Facts{Interfaces: []InterfaceFacts{{Name: "en0", Up: true, GatewayIP: ip(desc), Default: true}}}
}

func (f *fakeSource) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func next(t *testing.T, ch <-chan Event) (Event, bool) {
	t.Helper()
	synctest.Wait()
	select {
	case ev := <-ch:
		return ev, true
	default:
		return Event{}, false
	}
}

func TestWatchDebouncesPollsAndDetectsSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{events: make(chan struct{}, 16)}
		src.set("192.168.1.1", nil)
		var suspended time.Duration
		var smu sync.Mutex
		cfg := WatchConfig{Poll: 10 * time.Second, Debounce: 500 * time.Millisecond, suspended: func() (time.Duration, bool) {
			smu.Lock()
			defer smu.Unlock()
			return suspended, true
		}}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := Watch(ctx, src, cfg)

		ev, ok := next(t, ch)
		if !ok || ev.Reason != "start" || ev.Facts.Interfaces[0].GatewayIP != ip("192.168.1.1") {
			t.Fatalf("initial event %+v %v", ev, ok)
		}
		// A burst of events with no change: one read after the quiet
		// period, no event.
		reads := src.readCount()
		for range 5 {
			src.events <- struct{}{}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(600 * time.Millisecond)
		if ev, ok := next(t, ch); ok {
			t.Errorf("event without a change: %+v", ev)
		}
		if got := src.readCount() - reads; got != 1 {
			t.Errorf("%d reads for one burst, want 1 (debounced)", got)
		}
		// A change announced by an event arrives after the debounce.
		src.set("10.0.0.1", nil)
		src.events <- struct{}{}
		time.Sleep(499 * time.Millisecond)
		if _, ok := next(t, ch); ok {
			t.Error("event before the debounce ended")
		}
		time.Sleep(2 * time.Millisecond)
		if ev, ok := next(t, ch); !ok || ev.Reason != "change" || ev.Facts.Interfaces[0].GatewayIP != ip("10.0.0.1") {
			t.Errorf("change event %+v %v", ev, ok)
		}
		// Endless events still produce a read within 4× the debounce.
		reads = src.readCount()
		for range 25 {
			src.events <- struct{}{}
			time.Sleep(100 * time.Millisecond)
		}
		if got := src.readCount() - reads; got < 1 {
			t.Error("a continuous event storm starved the reads")
		}
		time.Sleep(time.Second) // let the storm's last debounce pass
		// A change without any event is found by the poll.
		src.set("10.0.0.2", nil)
		time.Sleep(10 * time.Second)
		if ev, ok := next(t, ch); !ok || ev.Reason != "poll" || ev.Facts.Interfaces[0].GatewayIP != ip("10.0.0.2") {
			t.Errorf("poll event %+v %v", ev, ok)
		}
		// The machine slept 2 minutes: an event even though nothing
		// changed, so consumers re-baseline.
		smu.Lock()
		suspended += 2 * time.Minute
		smu.Unlock()
		time.Sleep(10 * time.Second)
		if ev, ok := next(t, ch); !ok || !ev.Woke || ev.Reason != "wake" || ev.Slept != 2*time.Minute {
			t.Errorf("wake event %+v %v", ev, ok)
		}
		// Reading fails: one error event with the last good facts, then
		// recovery.
		src.set("10.0.0.2", errors.New("netlink: boom"))
		time.Sleep(20 * time.Second)
		ev, ok = next(t, ch)
		if !ok || ev.Err == nil || ev.Facts.Interfaces[0].GatewayIP != ip("10.0.0.2") {
			t.Errorf("error event %+v %v", ev, ok)
		}
		src.set("10.0.0.2", nil)
		time.Sleep(10 * time.Second)
		if ev, ok := next(t, ch); !ok || ev.Err != nil || ev.Reason != "poll" {
			t.Errorf("recovery event %+v %v", ev, ok)
		}
		cancel()
		synctest.Wait()
		if _, open := <-ch; open {
			t.Error("channel not closed after cancel")
		}
	})
}

func TestWatchNoticesTheFactsFileBeingRewritten(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "facts.json")
	write := func(gw string) {
		tmp := filepath.Join(dir, ".facts.tmp")
		os.WriteFile(tmp, []byte(`{"interfaces":[{"name":"en0","up":true,"gateway_ip":"`+gw+`"}]}`), 0o644)
		if err := os.Rename(tmp, path); err != nil { // atomic replace, as editors do
			t.Fatal(err)
		}
	}
	write("192.168.1.1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch := Watch(ctx, &FileSource{Path: path}, WatchConfig{Poll: time.Hour, Debounce: 20 * time.Millisecond})
	ev := <-ch
	if ev.Reason != "start" || !ev.Facts.Interfaces[0].Default {
		t.Fatalf("start %+v", ev)
	}
	write("10.0.0.1")
	select {
	case ev = <-ch:
		if ev.Reason != "change" || ev.Facts.Interfaces[0].GatewayIP != ip("10.0.0.1") {
			t.Errorf("event %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("rewriting the facts file was not noticed")
	}
	os.WriteFile(path, []byte(`{"interfaces":[`), 0o644)
	select {
	case ev = <-ch:
		if ev.Err == nil || !strings.Contains(ev.Err.Error(), path) || ev.Facts.Interfaces[0].GatewayIP != ip("10.0.0.1") {
			t.Errorf("broken file: %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("breaking the facts file was not noticed")
	}
}

func FuzzParseFacts(f *testing.F) {
	f.Add([]byte(`{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01","ssid":"STARLINK"}]}`))
	f.Add([]byte(`{"interfaces":[{"name":"en0","up":false},{"name":"en5","up":true,"gateway_ip":"fe80::1%en5","default":true}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		facts, err := ParseFacts(b)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, i := range facts.Interfaces {
			if i.Name == "" || seen[i.Name] {
				t.Fatalf("accepted %q with a nameless or duplicate interface", b)
			}
			seen[i.Name] = true
		}
	})
}

// TestWatchSendKeepsAWake: an event that replaces one nobody took yet
// keeps its wake (monitor and watch re-baseline on it), since samples from
// before the sleep are stale whatever happened since.
func TestWatchSendKeepsAWake(t *testing.T) {
	out := make(chan Event, 1)
	changed := Facts{Interfaces: []InterfaceFacts{{Name: "en0", Up: true, GatewayIP: ip("192.168.1.1"), GatewayMAC: config.HardwareAddr(mac("02:00:00:00:00:02"))}}}
	send(out, Event{Reason: "wake", Woke: true, Slept: time.Hour})
	send(out, Event{Reason: "change", Facts: changed})
	if ev := <-out; ev.Reason != "change" || !ev.Woke || ev.Slept != time.Hour || Describe(ev.Facts) != Describe(changed) {
		t.Fatalf("got %+v; want the change with its facts, still marked as a wake after 1h", ev)
	}
	send(out, Event{Reason: "poll"})
	if ev := <-out; ev.Woke {
		t.Fatalf("got %+v; a wake that was delivered is not repeated", ev)
	}
}

// TestParseRouteDeviceOnlyDefault: `default dev ppp0` (no gateway) is a
// default route of that interface; a subnet route is none.
func TestParseRouteDeviceOnlyDefault(t *testing.T) {
	r, ok, err := parseRoute(routeMsg(2, 0, rtTableMain, nil, 7, 50))
	if err != nil || !ok || r.Index != 7 || r.Gateway.IsValid() || !r.IPv4 || r.Metric != 50 {
		t.Fatalf("device-only default: %+v %v %v", r, ok, err)
	}
	if _, ok, _ := parseRoute(routeMsg(2, 24, rtTableMain, nil, 7, 0)); ok {
		t.Fatal("a subnet route was taken for a default")
	}
}
