// SPDX-License-Identifier: Apache-2.0

// Package mqtt publishes a running watch's state to an MQTT broker, for
// Home Assistant and anything else that reads MQTT: every link's rates,
// achieved rates, round trip and baseline, controller state, bufferbloat
// grade, shaper drops, pause and advice, with Home Assistant's discovery
// messages, an availability topic with a last will, and a switch per
// link (and one for every link) that pauses and resumes the shaping when
// the settings allow it ([mqtt] control).
//
// It runs beside the daemon on goroutines of its own and touches it only
// through Daemon: the status the daemon publishes for every reader, and
// SetPause, the one entry point of pause and resume, which bounds how
// many requests reach the loop. So a broker that is down, slow, or
// accepts and never answers costs the control loop nothing. The protocol
// is Eclipse Paho's (github.com/eclipse/paho.mqtt.golang).
package mqtt

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	daemonsettings "github.com/macake/macake/config/settings"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/internal/debounce"
	"github.com/macake/macake/internal/safefile"
	"github.com/macake/macake/logging"
)

// Daemon is what the publisher asks of a running watch (daemon.Daemon).
type Daemon interface {
	// Query is the status, with the shapers' counters read recently.
	Query(ctx context.Context, q statusapi.Query) statusapi.Status
	// SetPause pauses (For > 0) or resumes the shaping of a link, or of
	// every link ("").
	SetPause(ctx context.Context, c statusapi.PauseChange) (*statusapi.Pause, error)
}

// Options are what Run needs; Settings, Daemon and Log are required.
type Options struct {
	Settings daemonsettings.MQTT
	Daemon   Daemon
	Log      *slog.Logger
	// Hostname names the daemon on the broker; "" is os.Hostname.
	Hostname string
	// Version is the daemon's, shown on Home Assistant's device page.
	Version string
	// Dial opens the connection to the broker in place of the network
	// (tests); nil dials the broker's URL.
	Dial func(broker *url.URL) (net.Conn, error)
}

// Timing of the connection. The backoff doubles from minBackoff to
// maxBackoff, with jitter, both for the first connection (ours) and for
// the reconnections after a loss (Paho's).
const (
	connectTimeout = 10 * time.Second
	writeTimeout   = 10 * time.Second
	keepAlive      = 30 * time.Second
	pingTimeout    = 10 * time.Second
	minBackoff     = time.Second
	maxBackoff     = 2 * time.Minute
	// pauseTimeout bounds how long a switch's command waits for the
	// daemon's loop.
	pauseTimeout = 30 * time.Second
	// publishWait bounds the wait for the broker's acknowledgement of a
	// QoS 1 message, at connection and at shutdown.
	publishWait = 2 * time.Second
	// pendingCommands is how many switch commands wait for the
	// publisher's goroutine; more at once are dropped.
	pendingCommands = 8
	// By is the By of the pauses the switches ask for: status and the
	// log say "paused by mqtt".
	By = "mqtt"
)

// Run publishes until ctx ends, then says offline and disconnects. It
// returns an error only for settings it cannot use (a CA file that is
// not PEM); a broker that cannot be reached is retried, with the reason
// logged once per change.
func Run(ctx context.Context, o Options) error {
	p, err := newPublisher(o)
	if err != nil {
		o.Log.Error("MQTT: not publishing", logging.KeyError, err)
		return err
	}
	p.run(ctx)
	return nil
}

// command is a switch's message on its way to the publisher's goroutine.
type command struct {
	topic, payload string
	retained       bool
}

// publisher is one connection's worth of state; its goroutine (run) does
// all the publishing, the client's callbacks only hand it events.
type publisher struct {
	o      Options
	s      daemonsettings.MQTT
	log    *slog.Logger
	t      topics
	disc   discovery
	broker *url.URL
	client paho.Client

	connected chan struct{}
	haOnline  chan struct{}
	cmds      chan command

	// password is the last password read from the file, for when it
	// cannot be read again.
	pwMu       sync.Mutex
	password   string
	warnedMode bool

	// failures logs a failed connection once per reason.
	failures failureLog
	// dropped counts the commands dropped since the last log line of it.
	droppedMu sync.Mutex
	dropped   int
	droppedAt time.Time

	// links are the links whose discovery went out on this connection.
	links map[string]bool
	// stop is closed when Run is to end: no wait for the broker outlasts
	// it, so a broker that takes messages and never acknowledges them
	// cannot hold up the daemon's exit.
	stop <-chan struct{}
}

func newPublisher(o Options) (*publisher, error) {
	s := o.Settings
	broker, err := brokerURL(s.Broker)
	if err != nil {
		return nil, err
	}
	host := o.Hostname
	if host == "" {
		host, _ = os.Hostname()
	}
	t := newTopics(s, host)
	p := &publisher{o: o, s: s, log: o.Log, t: t, broker: broker,
		disc:      discovery{t: t, version: o.Version, control: s.Control},
		connected: make(chan struct{}, 1), haOnline: make(chan struct{}, 1), cmds: make(chan command, pendingCommands)}

	opts := paho.NewClientOptions().AddBroker(broker.String()).SetClientID("macake-"+t.node).
		SetProtocolVersion(4).SetCleanSession(true).SetOrderMatters(true).
		SetKeepAlive(keepAlive).SetPingTimeout(pingTimeout).SetConnectTimeout(connectTimeout).SetWriteTimeout(writeTimeout).
		SetAutoReconnect(true).SetMaxReconnectInterval(maxBackoff).SetConnectRetry(false).
		SetWill(t.availability(), offline, 1, true).SetStore(noStore{}).
		SetOnConnectHandler(func(paho.Client) { debounce.Signal(p.connected) }).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			p.log.Warn("MQTT: lost the connection to the broker; reconnecting with backoff", "broker", p.broker.Redacted(), logging.KeyError, err)
		}).
		SetConnectionNotificationHandler(func(_ paho.Client, n paho.ConnectionNotification) {
			if f, ok := n.(paho.ConnectionNotificationFailed); ok {
				p.failed(f.Reason)
			}
		})
	if s.Username != "" {
		opts.SetCredentialsProvider(p.credentials)
		if _, err := p.readPassword(); err != nil {
			// Logged, and tried again at every connection: the file may
			// come later (a secret mounted after start).
			p.log.Error("MQTT: cannot read the password file; connecting without a password until it can be read", "path", s.PasswordFile, logging.KeyError, err)
		}
	}
	if daemonsettings.MQTTSchemes[broker.Scheme] {
		cfg, err := tlsConfig(s.CAFile, broker.Hostname())
		if err != nil {
			return nil, err
		}
		opts.SetTLSConfig(cfg)
	}
	if o.Dial != nil {
		opts.SetCustomOpenConnectionFn(func(u *url.URL, _ paho.ClientOptions) (net.Conn, error) { return o.Dial(u) })
	}
	p.client = paho.NewClient(opts)
	return p, nil
}

// brokerURL is the broker's URL as Paho takes it: with the port, and
// the scheme spelt as Paho knows it.
func brokerURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("broker %q: %w", s, err)
	}
	isTLS, ok := daemonsettings.MQTTSchemes[u.Scheme]
	if !ok {
		return nil, fmt.Errorf("broker %q: unknown scheme %q", s, u.Scheme)
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), daemonsettings.MQTTDefaultPort(isTLS))
	}
	u.Scheme = "tcp"
	if isTLS {
		u.Scheme = "ssl"
	}
	u.Path = ""
	return u, nil
}

// tlsConfig trusts the system's authorities and those of caFile.
func tlsConfig(caFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil
	}
	pem, _, err := safefile.Read(caFile, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("reading ca_file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_file %s holds no PEM certificate", caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// readPassword reads the password file's first line.
func (p *publisher) readPassword() (string, error) {
	if p.s.PasswordFile == "" {
		return "", nil
	}
	p.pwMu.Lock()
	defer p.pwMu.Unlock()
	b, info, err := safefile.Read(p.s.PasswordFile, 4096)
	if err != nil {
		return "", err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 && !p.warnedMode {
		p.warnedMode = true
		p.log.Warn("MQTT: others may read the password file; make it root's alone", "path", p.s.PasswordFile,
			"mode", fmt.Sprintf("%04o", perm), "fix", "sudo chmod 0600 "+p.s.PasswordFile)
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	p.password = pw
	return pw, nil
}

// credentials are read again at every connection, so that a changed
// password needs no restart; an unreadable file keeps the last one.
func (p *publisher) credentials() (string, string) {
	if _, err := p.readPassword(); err != nil {
		p.log.Warn("MQTT: cannot read the password file; using the last password read", "path", p.s.PasswordFile, logging.KeyError, err)
	}
	p.pwMu.Lock()
	defer p.pwMu.Unlock()
	return p.s.Username, p.password
}

// run is the publisher's goroutine.
func (p *publisher) run(ctx context.Context) {
	p.stop = ctx.Done()
	p.log.Info("MQTT: publishing to the broker", "broker", p.broker.Redacted(), "topic_prefix", p.t.base,
		"discovery_prefix", p.t.discovery, "control", p.s.Control)
	if !p.connect(ctx) {
		return
	}
	defer p.shutdown()
	tick := time.NewTicker(time.Duration(p.s.Interval))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.connected:
			p.failures.connected(p.log, p.broker)
			p.announce(ctx)
		case <-p.haOnline:
			p.log.Info("MQTT: Home Assistant started; sending the discovery messages again")
			clear(p.links)
			p.publishAll(ctx)
		case c := <-p.cmds:
			p.command(ctx, c)
			p.publishAll(ctx)
		case <-tick.C:
			p.publishAll(ctx)
		}
	}
}

// connect makes the first connection, retrying with backoff until it
// succeeds or ctx ends; Paho reconnects after that.
func (p *publisher) connect(ctx context.Context) bool {
	wait := minBackoff
	for {
		tok := p.client.Connect()
		select {
		case <-tok.Done():
		case <-ctx.Done():
			// The attempt ends by its own timeout (connectTimeout), then
			// Paho disconnects; Run does not wait for it.
			p.client.Disconnect(0)
			return false
		}
		if tok.Error() == nil {
			return true
		}
		t := time.NewTimer(jitter(wait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		wait = min(2*wait, maxBackoff)
	}
}

// jitter spreads d over [d/2, d], so that many daemons that lost one
// broker do not all come back at once.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// announce is what a new connection starts with: online, the discovery
// messages, the subscriptions, the state.
func (p *publisher) announce(ctx context.Context) {
	p.links = map[string]bool{}
	p.publishWait(p.t.availability(), true, []byte(online))
	sw, other := p.disc.shapingSwitch("")
	p.publishWait(p.disc.topic(other), true, nil)
	p.publishWait(p.disc.topic(sw), true, sw.payload())
	subs := map[string]byte{p.t.haStatus(): 1}
	if p.s.Control {
		subs[p.t.command()] = 1
		subs[p.t.linkCommands()] = 1
	}
	tok := p.client.SubscribeMultiple(subs, p.onMessage)
	if !wait(tok, p.stop) || tok.Error() != nil {
		p.log.Warn("MQTT: subscribing to the switches' topics failed; they work again after the next connection", logging.KeyError, tokenError(tok))
	}
	p.publishAll(ctx)
}

// onMessage takes a message from the client's goroutine to the
// publisher's: a switch's command, or Home Assistant's status. It never
// blocks (Paho calls it in order, on the goroutine that reads the
// connection), so a flood of commands beyond pendingCommands is dropped.
func (p *publisher) onMessage(_ paho.Client, m paho.Message) {
	if m.Topic() == p.t.haStatus() {
		if string(m.Payload()) == online && !m.Retained() {
			debounce.Signal(p.haOnline)
		}
		return
	}
	select {
	case p.cmds <- command{topic: m.Topic(), payload: string(m.Payload()), retained: m.Retained()}:
	default:
		p.droppedMu.Lock()
		defer p.droppedMu.Unlock()
		p.dropped++
		if time.Since(p.droppedAt) >= time.Minute {
			p.log.Warn("MQTT: dropping switch commands: too many at once", "dropped", p.dropped, "waiting", pendingCommands)
			p.dropped, p.droppedAt = 0, time.Now()
		}
	}
}

// publishAll publishes the daemon's and every link's state, and the
// discovery messages of links new on this connection.
func (p *publisher) publishAll(ctx context.Context) {
	if !p.client.IsConnectionOpen() {
		return
	}
	st := p.o.Daemon.Query(ctx, statusapi.Query{})
	p.publishJSON(p.t.state(), newDaemonState(st))
	for _, link := range policyNames(st) {
		if !p.links[link] {
			p.advertise(link)
		}
		ls := newLinkState(st, link)
		avail := offline
		if ls.Active {
			avail = online
		}
		p.publish(p.t.linkAvailability(link), true, []byte(avail))
		p.publishJSON(p.t.linkState(link), ls)
	}
}

// advertise sends a link's discovery messages.
func (p *publisher) advertise(link string) {
	sw, other := p.disc.shapingSwitch(link)
	p.publishWait(p.disc.topic(other), true, nil)
	p.publishWait(p.disc.topic(sw), true, sw.payload())
	for _, e := range p.disc.linkEntities(link) {
		p.publishWait(p.disc.topic(e), true, e.payload())
	}
	if stopping(p.stop) {
		return // not all of them went out: the next connection sends them
	}
	p.links[link] = true
}

func (p *publisher) publishJSON(topic string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		p.log.Error("MQTT: encoding a state", "topic", topic, logging.KeyError, err)
		return
	}
	p.publish(topic, true, b)
}

// publish sends a state (QoS 0, retained): it never waits for the
// broker, and a message lost in a broken connection is replaced by the
// next.
func (p *publisher) publish(topic string, retained bool, payload []byte) {
	p.client.Publish(topic, 0, retained, payload)
}

// publishWait sends a message the broker must keep (QoS 1, retained:
// availability, discovery) and waits a little for its acknowledgement.
func (p *publisher) publishWait(topic string, retained bool, payload []byte) {
	if payload == nil {
		payload = []byte{} // an empty retained message removes one
	}
	tok := p.client.Publish(topic, 1, retained, payload)
	if !wait(tok, p.stop) {
		p.log.Debug("MQTT: no acknowledgement from the broker yet", "topic", topic)
	} else if err := tok.Error(); err != nil {
		p.log.Debug("MQTT: publishing failed", "topic", topic, logging.KeyError, err)
	}
}

// wait waits for tok, at most publishWait and not past stop (nil: no
// stop), and reports whether it completed.
func wait(tok paho.Token, stop <-chan struct{}) bool {
	t := time.NewTimer(publishWait)
	defer t.Stop()
	select {
	case <-tok.Done():
		return true
	case <-t.C:
	case <-stop:
	}
	return false
}

// shutdown says offline, waiting at most publishWait for the broker, and
// disconnects.
func (p *publisher) shutdown() {
	if p.client.IsConnectionOpen() {
		p.stop = nil
		p.publishWait(p.t.availability(), true, []byte(offline))
	}
	p.client.Disconnect(250)
	p.log.Info("MQTT: disconnected from the broker")
}

// tokenError is a token's error, or that it timed out.
func tokenError(tok paho.Token) error {
	if err := tok.Error(); err != nil {
		return err
	}
	return errors.New("no answer from the broker in time")
}

// failureLog logs failed connections once per reason, and the
// connection that ends them.
type failureLog struct {
	mu       sync.Mutex
	last     string
	failures int
}

// failed logs a failed connection attempt when its reason is new.
func (p *publisher) failed(err error) {
	f := &p.failures
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures++
	msg := err.Error()
	if msg == f.last {
		return
	}
	f.last = msg
	broker := p.broker.Redacted()
	switch {
	case errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword), errors.Is(err, packets.ErrorRefusedNotAuthorised):
		p.log.Error("MQTT: the broker refused macake's credentials; check [mqtt] username and password_file in macake.toml against the broker's users (retrying with backoff)",
			"broker", broker, "username", p.s.Username, logging.KeyError, err)
	case errors.As(err, new(x509.UnknownAuthorityError)), errors.As(err, new(x509.HostnameError)):
		p.log.Error("MQTT: the broker's certificate is not one macake trusts for this address; set [mqtt] ca_file to the CA that signed it, and name the broker as its certificate does (retrying with backoff)",
			"broker", broker, logging.KeyError, err)
	case errors.Is(err, packets.ErrorRefusedIDRejected):
		p.log.Error("MQTT: the broker rejected the client id", "broker", broker, "client_id", "macake-"+p.t.node, logging.KeyError, err)
	default:
		p.log.Warn("MQTT: cannot connect to the broker; retrying with backoff (the shaping goes on without it)", "broker", broker, logging.KeyError, err)
	}
}

// connected logs a connection, and how many attempts failed before it.
func (f *failureLog) connected(log *slog.Logger, broker *url.URL) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures > 0 {
		log.Info("MQTT: connected to the broker", "broker", broker.Redacted(), "failed_attempts", f.failures)
	} else {
		log.Info("MQTT: connected to the broker", "broker", broker.Redacted())
	}
	f.last, f.failures = "", 0
}

// noStore is a Paho store that keeps nothing. Every connection starts
// afresh with availability, discovery and state (announce), so a message
// the broker had not acknowledged when a connection broke needs no
// resending; and Paho's resending of stored messages at a reconnection
// races with its own writer (go test -race, Paho v1.5.1).
type noStore struct{}

func (noStore) Open()                             {}
func (noStore) Put(string, packets.ControlPacket) {}
func (noStore) Get(string) packets.ControlPacket  { return nil }
func (noStore) All() []string                     { return nil }
func (noStore) Del(string)                        {}
func (noStore) Close()                            {}
func (noStore) Reset()                            {}

// stopping reports whether stop is closed.
func stopping(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
