// SPDX-License-Identifier: Apache-2.0

package mqtt

import (
	"strings"

	"github.com/macake/macake/config"
	daemonsettings "github.com/macake/macake/config/settings"
)

// topics are every topic the publisher uses, from the settings and the
// host's name.
type topics struct {
	// node names this daemon among others on the same broker: the host's
	// name, as Home Assistant's discovery topics allow it.
	node string
	// base is the topic prefix; discovery Home Assistant's.
	base, discovery string
}

func newTopics(s daemonsettings.MQTT, hostname string) topics {
	node := nodeID(hostname)
	base := s.TopicPrefix
	if base == "" {
		base = "macake/" + node
	}
	return topics{node: node, base: base, discovery: s.DiscoveryPrefix}
}

// nodeID makes a host's name a discovery node id: its first label, lower
// case, every character but letters, digits, _ and - made _.
func nodeID(hostname string) string {
	name, _, _ := strings.Cut(strings.ToLower(hostname), ".")
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, name)
	if strings.Trim(name, "_") == "" {
		return "macake"
	}
	return name
}

// availability is where the daemon says online, and the broker offline
// for it when it goes away (the last will).
func (t topics) availability() string { return t.base + "/availability" }

// state is the daemon's own state: the pause of every link.
func (t topics) state() string { return t.base + "/state" }

// command is the switch of every link's shaping.
func (t topics) command() string { return t.base + "/shaping/set" }

// linkBase is where one link's topics live.
func (t topics) linkBase(link string) string { return t.base + "/link/" + link }

func (t topics) linkState(link string) string        { return t.linkBase(link) + "/state" }
func (t topics) linkAvailability(link string) string { return t.linkBase(link) + "/availability" }
func (t topics) linkCommand(link string) string      { return t.linkBase(link) + "/shaping/set" }

// linkCommands matches every link's switch.
func (t topics) linkCommands() string { return t.base + "/link/+/shaping/set" }

// linkOfCommand returns the link whose switch topic is topic: "" for
// every link's, ok false for a topic that is no switch's.
func (t topics) linkOfCommand(topic string) (link string, ok bool) {
	if topic == t.command() {
		return "", true
	}
	rest, found := strings.CutPrefix(topic, t.base+"/link/")
	if !found {
		return "", false
	}
	link, found = strings.CutSuffix(rest, "/shaping/set")
	if !found || !config.ValidLinkName(link) {
		return "", false
	}
	return link, true
}

// haStatus is where Home Assistant says online when it starts: the cue to
// send the discovery messages again.
func (t topics) haStatus() string { return t.discovery + "/status" }

// discoveryConfig is the discovery topic of one entity.
func (t topics) discoveryConfig(component, object string) string {
	return t.discovery + "/" + component + "/" + t.node + "/" + object + "/config"
}
