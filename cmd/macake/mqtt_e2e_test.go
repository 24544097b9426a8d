// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/internal/mosquitto"
)

// TestMQTTE2E: a real watch publishes to a real mosquitto with
// credentials from a file: Home Assistant's discovery messages, the
// availability and the link's state; the link's switch pauses the
// daemon's shaping (the pipes go, status says by mqtt) and resumes it; a
// switch command left retained on the broker is carried out while watch
// runs but not again after a restart; a stopped watch says offline.
func TestMQTTE2E(t *testing.T) {
	m := newE2EMac(t)
	b := mosquitto.Start(t, mosquitto.Options{Users: map[string]string{"macake": "pa55", "ha": "ha"}})
	pw := filepath.Join(m.dir, "mqtt-password")
	if err := os.WriteFile(pw, []byte("pa55\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	settings := fmt.Sprintf("[mqtt]\nbroker = %q\nusername = \"macake\"\npassword_file = %q\ntopic_prefix = \"macake/e2e\"\ninterval = \"1s\"\ncontrol = true\npause_for = \"10m\"\n", b.URL(), pw)
	if err := os.WriteFile(filepath.Join(m.dir, "macake.toml"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	m.write("cable", e2eFixed("50mbit"))
	w := m.startWatch()
	shaped := func() bool { return len(m.pipes()) == 2 }

	ha := newHAClient(t, b)
	cfg := ha.wait(t, "the switch's discovery message", func(topic, payload string) bool {
		return strings.HasPrefix(topic, "homeassistant/switch/") && strings.HasSuffix(topic, "/cable_shaping/config") && payload != ""
	})
	var sw map[string]any
	if err := json.Unmarshal([]byte(cfg), &sw); err != nil || sw["command_topic"] != "macake/e2e/link/cable/shaping/set" || sw["state_topic"] != "macake/e2e/link/cable/state" {
		t.Fatalf("the switch's config: %s (%v)", cfg, err)
	}
	ha.wait(t, "the download rate's discovery message", func(topic, payload string) bool {
		return strings.HasSuffix(topic, "/cable_download_rate/config") && strings.Contains(payload, `"unit_of_measurement":"Mbit/s"`)
	})
	ha.wait(t, "online", func(topic, payload string) bool { return topic == "macake/e2e/availability" && payload == "online" })
	ha.wait(t, "the link's state", func(topic, payload string) bool {
		return topic == "macake/e2e/link/cable/state" && strings.Contains(payload, `"download_rate_mbit":50,`) && strings.Contains(payload, `"shaping":"ON"`)
	})

	ha.publish(t, "macake/e2e/link/cable/shaping/set", false, "OFF")
	m.eventually("the pipes gone after the switch", func() bool { return len(m.pipes()) == 0 })
	m.eventually("status saying paused by mqtt", func() bool {
		st := m.status()
		return len(st.Pauses) == 1 && st.Pauses[0].Link == "cable" && st.Pauses[0].By == "mqtt" && st.Pauses[0].RemainingSeconds > 590
	})
	ha.wait(t, "the state paused", func(topic, payload string) bool {
		return topic == "macake/e2e/link/cable/state" && strings.Contains(payload, `"shaping":"OFF"`) && strings.Contains(payload, `"controller":"paused"`)
	})
	ha.publish(t, "macake/e2e/link/cable/shaping/set", false, "ON")
	m.eventually("the pipes back after the switch", shaped)

	// A switch set to retain its commands: carried out now, and left on
	// the broker.
	ha.publish(t, "macake/e2e/link/cable/shaping/set", true, "OFF")
	m.eventually("the pipes gone after a retained OFF", func() bool { return len(m.pipes()) == 0 })
	// The daemon takes three pauses and resumes at once, then one every
	// 5 s: this is the fourth.
	for {
		code, _, stderr := m.run("resume", "cable")
		if code == exitcode.OK {
			break
		}
		if !strings.Contains(stderr, "try again in") {
			t.Fatalf("resume: exit %d\n%s", code, stderr)
		}
		time.Sleep(time.Second)
	}
	m.eventually("the pipes back after resume", shaped)
	// After a restart the broker hands it over again: logged, not
	// carried out, removed.
	if code := w.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("watch exited %d", code)
	}
	ha.wait(t, "offline after the stop", func(topic, payload string) bool { return topic == "macake/e2e/availability" && payload == "offline" })
	w = m.startWatch()
	m.eventually("the retained command logged", func() bool {
		return strings.Contains(m.log(), "ignoring a retained switch command from before macake connected")
	})
	ha.wait(t, "the retained command removed", func(topic, payload string) bool {
		return topic == "macake/e2e/link/cable/shaping/set" && payload == ""
	})
	time.Sleep(500 * time.Millisecond)
	if !shaped() || len(m.status().Pauses) != 0 {
		t.Errorf("the retained OFF paused the restarted watch: pipes %v, pauses %+v", m.pipes(), m.status().Pauses)
	}
	if code := w.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("watch exited %d", code)
	}
}

// haClient is the test's Home Assistant: a client subscribed to
// everything, which remembers every message.
type haClient struct {
	c    paho.Client
	mu   sync.Mutex
	msgs []paho.Message
}

func newHAClient(t *testing.T, b *mosquitto.Broker) *haClient {
	t.Helper()
	h := &haClient{}
	h.c = paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + b.Addr()).SetClientID("ha").SetUsername("ha").SetPassword("ha").SetOrderMatters(true))
	if tok := h.c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connecting to mosquitto: %v", tok.Error())
	}
	tok := h.c.Subscribe("#", 1, func(_ paho.Client, m paho.Message) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.msgs = append(h.msgs, m)
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribing: %v", tok.Error())
	}
	t.Cleanup(func() { h.c.Disconnect(0) })
	return h
}

// wait returns the payload of the first message, from the start, that ok
// takes, waiting up to 15 s for it.
func (h *haClient) wait(t *testing.T, what string, ok func(topic, payload string) bool) string {
	t.Helper()
	seen := 0
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		msgs := h.msgs[seen:]
		seen = len(h.msgs)
		h.mu.Unlock()
		for _, m := range msgs {
			if ok(m.Topic(), string(m.Payload())) {
				return string(m.Payload())
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s on the broker in 15 s", what)
	return ""
}

func (h *haClient) publish(t *testing.T, topic string, retained bool, payload string) {
	t.Helper()
	if tok := h.c.Publish(topic, 1, retained, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publishing on %s: %v", topic, tok.Error())
	}
}
