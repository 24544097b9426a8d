// SPDX-License-Identifier: Apache-2.0

package mqtt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	daemonsettings "github.com/macake/macake/config/settings"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/internal/mosquitto"
	"github.com/macake/macake/internal/syncbuf"
)

// fakeDaemon answers the publisher as a watch would: a status, and pauses
// that change it.
type fakeDaemon struct {
	mu      sync.Mutex
	st      statusapi.Status
	changes []statusapi.PauseChange
	refuse  error
	// slow is how long each pause takes (a busy loop).
	slow time.Duration
}

// Query returns a deep copy of the status, as the daemon's is its own.
func (f *fakeDaemon) Query(context.Context, statusapi.Query) statusapi.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := json.Marshal(f.st)
	if err != nil {
		panic(err)
	}
	var st statusapi.Status
	if err := json.Unmarshal(b, &st); err != nil {
		panic(err)
	}
	return st
}

func (f *fakeDaemon) SetPause(_ context.Context, c statusapi.PauseChange) (*statusapi.Pause, error) {
	f.mu.Lock()
	slow := f.slow
	f.mu.Unlock()
	time.Sleep(slow)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, c)
	if f.refuse != nil {
		return nil, f.refuse
	}
	key := c.Link
	if key == "" {
		key = statusapi.AllLinks
	}
	f.st.Pauses = slices.DeleteFunc(f.st.Pauses, func(p statusapi.Pause) bool { return p.Link == key || c.Link == "" })
	if c.For == 0 {
		return nil, nil
	}
	p := statusapi.Pause{Link: key, Since: time.Now().UTC(), Until: time.Now().Add(c.For).UTC(), RemainingSeconds: c.For.Seconds(), By: c.By}
	f.st.Pauses = append(f.st.Pauses, p)
	return &p, nil
}

func (f *fakeDaemon) set(change func(*statusapi.Status)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.st)
}

func (f *fakeDaemon) pauses() []statusapi.PauseChange {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.changes)
}

// homeStatus is a watch with two policies: home active, loaded, with
// advice; hotspot inactive.
func homeStatus() statusapi.Status {
	ctl := &statusapi.Controller{Mode: "autorate", Status: "running", Shaping: true, Engaged: true, IdleRTTSeconds: 0.0212,
		Responses: 1200,
		Download:  statusapi.Direction{RateBits: 42_123_456, AchievedBits: 39_870_000, WindowAverageSeconds: 0.0081},
		Upload:    statusapi.Direction{RateBits: 9_500_000, AchievedBits: 2_100_000, WindowAverageSeconds: 0.0012}}
	return statusapi.Status{
		FormatVersion: statusapi.FormatVersion,
		Daemon:        statusapi.Daemon{Running: true, Version: "v1.2.3"},
		Policies:      []statusapi.Policy{{Name: "home", Active: true}, {Name: "hotspot"}},
		Links: []statusapi.Link{{Name: "home", Interface: "en0", Mode: "autorate", Shaped: true, Controller: ctl,
			Shapers: []statusapi.Shaper{
				{Direction: "upload", RateBits: 9_500_000, Stats: &statusapi.ShaperStats{Drops: 17}},
				{Direction: "download", RateBits: 42_123_456, Stats: &statusapi.ShaperStats{Drops: 1234}},
			},
			Advice: []statusapi.Advice{{Message: "download sat at max 62 % of loaded time in the last hour: raise max from 40 to ~55 Mbit/s"}},
		}},
		Pauses: []statusapi.Pause{},
	}
}

// run is a publisher under test.
type run struct {
	t      *testing.T
	d      *fakeDaemon
	log    *syncbuf.Buffer
	cancel context.CancelFunc
	done   chan error
}

func startPublisher(t *testing.T, s daemonsettings.MQTT, d *fakeDaemon, dial func(*url.URL) (net.Conn, error)) *run {
	t.Helper()
	r := &run{t: t, d: d, log: &syncbuf.Buffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	log := slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() {
		r.done <- Run(ctx, Options{Settings: s, Daemon: d, Log: log, Hostname: "Router.lan", Version: "v1.2.3", Dial: dial})
	}()
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			t.Logf("the publisher's log:\n%s", r.log)
		}
	})
	return r
}

func (r *run) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		r.t.Error("the publisher did not stop within 15s")
	}
}

func (r *run) logged(s string) bool { return strings.Contains(r.log.String(), s) }

// controlled starts a broker and a daemon at homeStatus, with publisher
// settings that let the broker's switches control the daemon.
func controlled(t *testing.T) (*mosquitto.Broker, *fakeDaemon, daemonsettings.MQTT) {
	b := mosquitto.Start(t, mosquitto.Options{})
	s := settings(b)
	s.Control = true
	return b, &fakeDaemon{st: homeStatus()}, s
}

// settings are a publisher's settings for broker b.
func settings(b *mosquitto.Broker) daemonsettings.MQTT {
	s := daemonsettings.MQTTDefaults
	s.Broker = b.URL()
	s.Interval = units.Duration(time.Second)
	return s
}

// eventually waits up to 15 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// subscriber is a test's own client, subscribed to everything.
type subscriber struct {
	c  paho.Client
	mu sync.Mutex
	// first and last are each topic's first and last message.
	first, last map[string]paho.Message
	all         []paho.Message
}

func subscribe(t *testing.T, b *mosquitto.Broker, user, password string) *subscriber {
	t.Helper()
	s := &subscriber{first: map[string]paho.Message{}, last: map[string]paho.Message{}}
	opts := paho.NewClientOptions().AddBroker("tcp://" + b.Addr()).SetClientID(fmt.Sprintf("test-%d", time.Now().UnixNano())).
		SetUsername(user).SetPassword(password).SetAutoReconnect(false).SetOrderMatters(true)
	s.c = paho.NewClient(opts)
	if tok := s.c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("the test's client cannot connect: %v", tok.Error())
	}
	tok := s.c.Subscribe("#", 1, func(_ paho.Client, m paho.Message) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.first[m.Topic()]; !ok {
			s.first[m.Topic()] = m
		}
		s.last[m.Topic()] = m
		s.all = append(s.all, m)
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribing: %v", tok.Error())
	}
	t.Cleanup(func() { s.c.Disconnect(0) })
	return s
}

// get is the last payload on topic, and whether there was one.
func (s *subscriber) get(topic string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.last[topic]
	if !ok {
		return "", false
	}
	return string(m.Payload()), true
}

// has waits until topic's last payload satisfies ok.
func (s *subscriber) wait(t *testing.T, topic string, ok func(string) bool) string {
	t.Helper()
	var got string
	eventually(t, topic, func() bool {
		p, has := s.get(topic)
		got = p
		return has && ok(p)
	})
	return got
}

func (s *subscriber) publish(t *testing.T, topic string, retained bool, payload string) {
	t.Helper()
	if tok := s.c.Publish(topic, 1, retained, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publishing on %s: %v", topic, tok.Error())
	}
}

// linkState reads a link's state document.
func (s *subscriber) linkState(t *testing.T, link string, ok func(linkState) bool) linkState {
	t.Helper()
	var ls linkState
	s.wait(t, "macake/router/link/"+link+"/state", func(p string) bool {
		ls = linkState{}
		return json.Unmarshal([]byte(p), &ls) == nil && ok(ls)
	})
	return ls
}

// TestDiscoveryAndState: a real mosquitto receives the discovery messages
// of every entity (a golden file: Home Assistant's contract), retained;
// the availability online; every link's state, updated as the status
// changes; and an inactive link's availability offline.
func TestDiscoveryAndState(t *testing.T) {
	t.Parallel()
	b, d, s := controlled(t)
	r := startPublisher(t, s, d, nil)
	sub := subscribe(t, b, "", "")
	sub.wait(t, "macake/router/availability", func(p string) bool { return p == "online" })
	// The first round is out (hotspot's state comes last).
	sub.linkState(t, "hotspot", func(linkState) bool { return true })

	// A new client gets what the broker retained: all a Home Assistant
	// that starts later sees.
	late := subscribe(t, b, "", "")
	eventually(t, "the retained messages", func() bool {
		_, ok := late.get("homeassistant/switch/router/home_shaping/config")
		_, ok2 := late.get("macake/router/link/hotspot/state")
		return ok && ok2
	})
	time.Sleep(300 * time.Millisecond)
	late.mu.Lock()
	var topics []string
	for topic, m := range late.first {
		if !m.Retained() {
			t.Errorf("%s was not retained", topic)
		}
		topics = append(topics, topic)
	}
	sort.Strings(topics)
	var out bytes.Buffer
	for _, topic := range topics {
		if strings.HasSuffix(topic, "/state") {
			continue // below
		}
		var pretty bytes.Buffer
		payload := late.first[topic].Payload()
		if json.Indent(&pretty, payload, "", "  ") != nil {
			pretty.Write(payload)
		}
		fmt.Fprintf(&out, "%s\n%s\n\n", topic, pretty.Bytes())
	}
	late.mu.Unlock()
	golden.Check(t, "testdata/discovery.txt", out.Bytes(), "Home Assistant's discovery messages")

	home := sub.linkState(t, "home", func(linkState) bool { return true })
	want := `{"active":true,"shaping":"ON","paused_until":null,"controller":"running","download_rate_mbit":42.123,"upload_rate_mbit":9.5,` +
		`"download_achieved_mbit":39.87,"upload_achieved_mbit":2.1,"rtt_ms":30.5,"baseline_ms":21.2,"grade":"A","download_drops":1234,"upload_drops":17,` +
		`"advice":"download sat at max 62 % of loaded time in the last hour: raise max from 40 to ~55 Mbit/s"}`
	if got, _ := json.Marshal(home); string(got) != want {
		t.Errorf("home's state:\n got %s\nwant %s", got, want)
	}
	hotspot := sub.linkState(t, "hotspot", func(linkState) bool { return true })
	if hotspot.Active || hotspot.Controller != "inactive" || hotspot.DownloadRate != nil || hotspot.Shaping != "ON" {
		t.Errorf("hotspot's state: %+v", hotspot)
	}
	if p, _ := sub.get("macake/router/link/hotspot/availability"); p != "offline" {
		t.Errorf("hotspot's availability %q, want offline", p)
	}
	if p, _ := sub.get("macake/router/state"); p != `{"shaping":"ON","paused_until":null,"active_links":1,"version":"v1.2.3"}` {
		t.Errorf("the daemon's state: %s", p)
	}

	// The state follows the status at the next interval.
	d.set(func(st *statusapi.Status) {
		st.Links[0].Shapers[1].RateBits = 30_000_000
		st.Links[0].Controller.Download.WindowAverageSeconds = 0.250
	})
	home = sub.linkState(t, "home", func(s linkState) bool { return *s.DownloadRate == 30 })
	if *home.Grade != "D" {
		t.Errorf("grade with 251.2 ms added: %s, want D", *home.Grade)
	}

	// A clean stop says offline itself (the broker sends the will only
	// for a connection that breaks).
	r.stop()
	sub.wait(t, "macake/router/availability", func(p string) bool { return p == "offline" })
	if !r.logged("disconnected from the broker") {
		t.Error("no log line at the clean stop")
	}
}

// TestSwitchPausesAndResumes: with control on, a link's switch turned
// off pauses that link for pause_for, on resumes it, and the daemon's
// switch pauses every link; the state says so at once. A payload that is
// neither ON nor OFF, and a command the state agrees with, change
// nothing; a refused pause is logged.
func TestSwitchPausesAndResumes(t *testing.T) {
	t.Parallel()
	b, d, s := controlled(t)
	s.PauseFor = units.Duration(45 * time.Minute)
	s.Interval = units.Duration(time.Hour) // the state below comes from the commands
	r := startPublisher(t, s, d, nil)
	sub := subscribe(t, b, "", "")
	sub.linkState(t, "home", func(linkState) bool { return true })

	sub.publish(t, "macake/router/link/home/shaping/set", false, "OFF")
	home := sub.linkState(t, "home", func(s linkState) bool { return s.Shaping == "OFF" })
	if home.Controller != "paused" || home.PausedUntil == nil || time.Until(*home.PausedUntil) < 44*time.Minute {
		t.Errorf("home's state after OFF: %+v", home)
	}
	if got := d.pauses(); len(got) != 1 || got[0] != (statusapi.PauseChange{Link: "home", For: 45 * time.Minute, By: "mqtt"}) {
		t.Fatalf("pauses asked: %+v", got)
	}
	sub.publish(t, "macake/router/link/home/shaping/set", false, "OFF") // so already
	sub.publish(t, "macake/router/link/home/shaping/set", false, "maybe")
	sub.publish(t, "macake/router/link/home/shaping/set", false, "on")
	sub.linkState(t, "home", func(s linkState) bool { return s.Shaping == "ON" })
	if got := d.pauses(); len(got) != 2 || got[1] != (statusapi.PauseChange{Link: "home", By: "mqtt"}) {
		t.Fatalf("pauses asked: %+v", got)
	}
	if !r.logged("neither ON nor OFF") {
		t.Error("a bad payload was not logged")
	}

	sub.publish(t, "macake/router/shaping/set", false, "OFF")
	sub.wait(t, "macake/router/state", func(p string) bool { return strings.Contains(p, `"shaping":"OFF"`) })
	sub.linkState(t, "hotspot", func(s linkState) bool { return s.Shaping == "OFF" && s.Controller == "paused" })
	if got := d.pauses(); len(got) != 3 || got[2] != (statusapi.PauseChange{Link: "", For: 45 * time.Minute, By: "mqtt"}) {
		t.Fatalf("pauses asked: %+v", got)
	}

	d.set(func(*statusapi.Status) {})
	d.mu.Lock()
	d.refuse = errors.New("every link is paused (until 12:00:00); resume them all without naming a link")
	d.mu.Unlock()
	sub.publish(t, "macake/router/link/home/shaping/set", false, "ON")
	eventually(t, "the refusal logged", func() bool { return r.logged("the switch's resume was refused") && r.logged("resume them all") })
}

// TestControlOff: without control the switches are read-only binary
// sensors, the switch configs are removed, and a command changes
// nothing: macake subscribes to no switch topic.
func TestControlOff(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, mosquitto.Options{})
	d := &fakeDaemon{st: homeStatus()}
	sub := subscribe(t, b, "", "")
	// A switch from when control was on.
	sub.publish(t, "homeassistant/switch/router/home_shaping/config", true, `{"name":"home shaping"}`)
	startPublisher(t, settings(b), d, nil)
	cfg := sub.wait(t, "homeassistant/binary_sensor/router/home_shaping/config", func(p string) bool { return p != "" })
	if strings.Contains(cfg, "command_topic") || !strings.Contains(cfg, `"device_class":"running"`) {
		t.Errorf("the read-only switch: %s", cfg)
	}
	sub.wait(t, "homeassistant/switch/router/home_shaping/config", func(p string) bool { return p == "" })
	sub.publish(t, "macake/router/link/home/shaping/set", false, "OFF")
	sub.publish(t, "macake/router/shaping/set", false, "OFF")
	time.Sleep(1500 * time.Millisecond)
	if got := d.pauses(); len(got) != 0 {
		t.Errorf("control off, yet the switch paused: %+v", got)
	}
}

// TestRetainedSwitchCommandIsNotReapplied: a switch command the broker
// kept from before macake connected (retained, e.g. from before a
// restart) is logged against the state, never carried out, and removed;
// one that agrees with the state is logged as such.
func TestRetainedSwitchCommandIsNotReapplied(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, mosquitto.Options{})
	d := &fakeDaemon{st: homeStatus()}
	// home was paused before the restart and the pause ran out since;
	// every link's pause still holds.
	d.st.Pauses = []statusapi.Pause{{Link: "*", Until: time.Now().Add(time.Hour), RemainingSeconds: 3600}}
	sub := subscribe(t, b, "", "")
	sub.publish(t, "macake/router/link/home/shaping/set", true, "ON")
	sub.publish(t, "macake/router/shaping/set", true, "OFF")
	s := settings(b)
	s.Control = true
	r := startPublisher(t, s, d, nil)
	eventually(t, "the retained commands logged", func() bool {
		return r.logged("ignoring a retained switch command from before macake connected") && r.logged("agrees with the state")
	})
	log := r.log.String()
	if !strings.Contains(log, "link=home") || !strings.Contains(log, "asks=shaping state=paused") {
		t.Errorf("the log does not say what the retained command asked and what the state is:\n%s", log)
	}
	sub.wait(t, "macake/router/link/home/shaping/set", func(p string) bool { return p == "" })
	if got := d.pauses(); len(got) != 0 {
		t.Errorf("a retained command was carried out: %+v", got)
	}
	// Removed from the broker: a client that connects now gets nothing.
	late := subscribe(t, b, "", "")
	late.wait(t, "macake/router/availability", func(p string) bool { return p == "online" })
	time.Sleep(200 * time.Millisecond)
	if p, ok := late.get("macake/router/link/home/shaping/set"); ok {
		t.Errorf("the retained command is still on the broker: %q", p)
	}
}

// TestBrokerRestart: the broker goes away and comes back without its
// retained messages (no persistence): the publisher logs the loss once,
// reconnects by itself with backoff, and sends availability, discovery
// and state again.
func TestBrokerRestart(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, mosquitto.Options{})
	d := &fakeDaemon{st: homeStatus()}
	r := startPublisher(t, settings(b), d, nil)
	eventually(t, "connected", func() bool { return r.logged("connected to the broker") })
	b.Stop()
	eventually(t, "the loss logged", func() bool { return r.logged("lost the connection to the broker") })
	time.Sleep(2 * time.Second) // a few reconnections fail
	b.Start()
	eventually(t, "reconnected", func() bool { return strings.Count(r.log.String(), "msg=\"MQTT: connected to the broker\"") == 2 })
	sub := subscribe(t, b, "", "")
	sub.wait(t, "macake/router/availability", func(p string) bool { return p == "online" })
	sub.wait(t, "homeassistant/sensor/router/home_rtt/config", func(p string) bool { return p != "" })
	sub.linkState(t, "home", func(s linkState) bool { return s.Active })
	if n := strings.Count(r.log.String(), "cannot connect to the broker"); n > 1 {
		t.Errorf("the failed reconnections were logged %d times, want once", n)
	}
}

// TestBadCredentials: a broker that refuses the credentials gets one
// clear log line however often it refuses; the password file is read
// again at every attempt, so a corrected one connects without a restart;
// a password file others may read is warned of once.
func TestBadCredentials(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, mosquitto.Options{Users: map[string]string{"macake": "s3cret", "ha": "ha"}})
	pw := filepath.Join(t.TempDir(), "mqtt-password")
	if err := os.WriteFile(pw, []byte("wrong\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{st: homeStatus()}
	s := settings(b)
	s.Username, s.PasswordFile = "macake", pw
	r := startPublisher(t, s, d, nil)
	eventually(t, "the refusal logged", func() bool { return r.logged("the broker refused macake's credentials") })
	time.Sleep(3 * time.Second) // retried meanwhile
	if n := strings.Count(r.log.String(), "refused macake's credentials"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once:\n%s", n, r.log)
	}
	if !strings.Contains(r.log.String(), "username=macake") || strings.Contains(r.log.String(), "wrong") {
		t.Errorf("the log should name the user and never the password:\n%s", r.log)
	}
	if n := strings.Count(r.log.String(), "others may read the password file"); n != 1 || !r.logged("mode=0644") {
		t.Errorf("a password file others may read was warned of %d times, want once with its mode", n)
	}
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "connected with the new password", func() bool { return r.logged("connected to the broker") })
	sub := subscribe(t, b, "ha", "ha")
	sub.wait(t, "macake/router/availability", func(p string) bool { return p == "online" })
}

// TestLastWill: a connection that breaks without a goodbye makes the
// broker publish the will, offline.
func TestLastWill(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, mosquitto.Options{})
	var mu sync.Mutex
	var conns []net.Conn
	dial := func(u *url.URL) (net.Conn, error) {
		c, err := net.Dial("tcp", u.Host)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	d := &fakeDaemon{st: homeStatus()}
	startPublisher(t, settings(b), d, dial)
	sub := subscribe(t, b, "", "")
	sub.wait(t, "macake/router/availability", func(p string) bool { return p == "online" })
	// Stop the client's goroutines from saying goodbye: close the socket
	// under them, as a crash or a cut cable would.
	mu.Lock()
	conns[len(conns)-1].(*net.TCPConn).SetLinger(0)
	conns[len(conns)-1].Close()
	mu.Unlock()
	sub.wait(t, "macake/router/availability", func(p string) bool { return p == "offline" })
}

// TestFloodOfSwitchCommands: a flood of commands while the daemon takes
// its time with each is dropped beyond the few that wait, with one log
// line, and the publisher goes on.
func TestFloodOfSwitchCommands(t *testing.T) {
	t.Parallel()
	b, d, s := controlled(t)
	d.slow = 300 * time.Millisecond
	r := startPublisher(t, s, d, nil)
	sub := subscribe(t, b, "", "")
	sub.linkState(t, "home", func(linkState) bool { return true })
	for i := range 200 {
		payload := "OFF"
		if i%2 == 1 {
			payload = "ON"
		}
		sub.c.Publish("macake/router/link/home/shaping/set", 0, false, payload)
	}
	eventually(t, "the drops logged", func() bool { return r.logged("dropping switch commands: too many at once") })
	time.Sleep(4 * time.Second)
	if n := len(d.pauses()); n > pendingCommands+4 {
		t.Errorf("%d of 200 commands reached the daemon; at most %d wait", n, pendingCommands)
	}
	if n := strings.Count(r.log.String(), "dropping switch commands"); n != 1 {
		t.Errorf("the drops were logged %d times, want once a minute", n)
	}
	// The publisher goes on.
	d.set(func(st *statusapi.Status) { st.Links[0].Shapers[1].RateBits = 12_000_000 })
	sub.linkState(t, "home", func(s linkState) bool { return s.DownloadRate != nil && *s.DownloadRate == 12 })
}

// TestTLS: an mqtts broker whose certificate a CA of its own signed is
// reached with that CA in ca_file; without it, the publisher says why it
// cannot connect and never sends anything in the clear.
func TestTLS(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, mosquitto.Options{TLS: true})
	d := &fakeDaemon{st: homeStatus()}
	s := settings(b)
	r := startPublisher(t, s, d, nil)
	eventually(t, "the certificate refused", func() bool {
		return r.logged("set [mqtt] ca_file to the CA that signed it") && r.logged("certificate signed by unknown authority")
	})
	if r.logged("connected to the broker") {
		t.Fatal("connected without the CA")
	}
	r.stop()

	s.CAFile = b.CAFile
	r = startPublisher(t, s, d, nil)
	eventually(t, "connected over TLS", func() bool { return r.logged("MQTT: connected to the broker") })
	if !r.logged("broker=ssl://127.0.0.1:") {
		t.Errorf("the broker is not named as a TLS one:\n%s", r.log)
	}
}
