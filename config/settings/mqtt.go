// SPDX-License-Identifier: Apache-2.0

package settings

import (
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/units"
)

// MaxPause bounds a pause of the shaping, whoever asks: a longer one is
// refused, so that a forgotten pause cannot leave a link unshaped for
// longer.
const MaxPause = 24 * time.Hour

// MQTT is the [mqtt] table of the daemon settings: the optional publisher
// of every link's state to an MQTT broker, with Home Assistant's
// discovery messages and a switch that pauses the shaping.
type MQTT struct {
	// Broker is the broker's URL, mqtt://HOST[:PORT] (1883 by default)
	// or mqtts://HOST[:PORT] for TLS (8883); "" publishes nothing.
	Broker string `toml:"broker"`
	// Username is the user name the broker knows macake by; PasswordFile
	// an absolute path to a file whose first line is its password (kept
	// out of macake.toml, which everyone may read).
	Username     string `toml:"username"`
	PasswordFile string `toml:"password_file"`
	// CAFile is an absolute path to PEM certificates of the authorities
	// that may sign an mqtts broker's certificate, beside the system's.
	CAFile string `toml:"ca_file"`
	// TopicPrefix is where the state and the switches live; "" is
	// "macake/" and the host's name.
	TopicPrefix string `toml:"topic_prefix"`
	// DiscoveryPrefix is Home Assistant's discovery prefix.
	DiscoveryPrefix string `toml:"discovery_prefix"`
	// Interval is how often every link's state is published.
	Interval units.Duration `toml:"interval"`
	// Control honours the switches' commands: off pauses the shaping for
	// PauseFor, on resumes it. Without it the switches are read-only
	// sensors and nothing on the broker can change the shaping.
	Control bool `toml:"control"`
	// PauseFor is how long a switch turned off pauses the shaping (at
	// most MaxPause); it comes back by itself then.
	PauseFor units.Duration `toml:"pause_for"`
}

// MQTTDefaults are the defaults of the [mqtt] table.
var MQTTDefaults = MQTT{
	DiscoveryPrefix: "homeassistant",
	Interval:        units.Duration(10 * time.Second),
	PauseFor:        units.Duration(time.Hour),
}

// The bounds of [mqtt].interval.
const (
	minMQTTInterval = time.Second
	maxMQTTInterval = time.Hour
)

// Enabled reports whether the settings name a broker to publish to.
func (m MQTT) Enabled() bool { return m.Broker != "" }

// MQTTSchemes maps the broker URL schemes macake takes to whether they
// use TLS.
var MQTTSchemes = map[string]bool{"mqtt": false, "tcp": false, "mqtts": true, "ssl": true, "tls": true}

// MQTTDefaultPort is the broker's port when its URL names none.
func MQTTDefaultPort(tls bool) string {
	if tls {
		return "8883"
	}
	return "1883"
}

// validateMQTT checks the [mqtt] table.
func validateMQTT(d config.Checker, m *MQTT) {
	if m.Broker == "" {
		for _, key := range []string{"username", "password_file", "ca_file", "topic_prefix", "discovery_prefix", "interval", "control", "pause_for"} {
			if d.Given("mqtt." + key) {
				d.Warn("mqtt."+key, "[mqtt] names no broker, so nothing is published; add broker = \"mqtt://HOST:1883\"")
				break
			}
		}
	} else if msg := checkBrokerURL(m.Broker); msg != "" {
		d.Bad("mqtt.broker", "%s", msg)
	} else if u, _ := url.Parse(m.Broker); !MQTTSchemes[u.Scheme] && m.CAFile != "" {
		d.Warn("mqtt.ca_file", "the broker %q is not TLS (mqtts://), so ca_file is not used", m.Broker)
	}
	for _, f := range []struct{ key, path string }{{"password_file", m.PasswordFile}, {"ca_file", m.CAFile}} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			d.Bad("mqtt."+f.key, "%q must be an absolute path", f.path)
		}
	}
	if m.PasswordFile != "" && m.Username == "" {
		d.Bad("mqtt.password_file", "a password needs a user name: add username = \"...\" to [mqtt]")
	}
	if strings.IndexFunc(m.Username, unicode.IsControl) >= 0 {
		d.Bad("mqtt.username", "must not contain control characters")
	}
	if m.TopicPrefix != "" {
		if msg := checkTopicPrefix(m.TopicPrefix); msg != "" {
			d.Bad("mqtt.topic_prefix", "%q %s", m.TopicPrefix, msg)
		}
	}
	if msg := checkTopicPrefix(m.DiscoveryPrefix); msg != "" {
		d.Bad("mqtt.discovery_prefix", "%q %s", m.DiscoveryPrefix, msg)
	}
	if i := time.Duration(m.Interval); i < minMQTTInterval || i > maxMQTTInterval {
		d.Bad("mqtt.interval", "%v is outside %v..%v", i, minMQTTInterval, maxMQTTInterval)
	}
	if p := time.Duration(m.PauseFor); p <= 0 || p > MaxPause {
		d.Bad("mqtt.pause_for", "%v: give a length above 0 and at most %v", p, MaxPause)
	}
}

// checkBrokerURL explains what is wrong with a broker's URL, or returns "".
func checkBrokerURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return strconv.Quote(s) + ` is not a broker URL, e.g. "mqtt://192.168.1.10:1883" or "mqtts://broker.example:8883"`
	}
	if _, ok := MQTTSchemes[u.Scheme]; !ok {
		return strconv.Quote(u.Scheme) + ` is not a broker's scheme: use mqtt:// (or tcp://), or mqtts:// (or ssl://, tls://) for TLS`
	}
	if u.User != nil {
		return "keep the credentials out of the URL, which everyone may read: set username, and password_file to a file only root reads"
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return strconv.Quote(s) + " has a path or a query; a broker URL is scheme://HOST[:PORT]"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return strconv.Quote(p) + " is not a port (1..65535)"
		}
	}
	return ""
}

// checkTopicPrefix explains what keeps s from prefixing MQTT topics, or
// returns "".
func checkTopicPrefix(s string) string {
	switch {
	case s == "":
		return "is empty"
	case strings.ContainsAny(s, "+#"):
		return "holds a wildcard (+ or #), which a topic that is published to cannot"
	case strings.HasPrefix(s, "$"):
		return "starts with $, which brokers keep for themselves"
	case strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//"):
		return "has an empty level: no / at either end, nor two together"
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "holds a control character"
	case len(s) > 200:
		return "is longer than 200 bytes"
	}
	return ""
}
