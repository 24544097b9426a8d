// SPDX-License-Identifier: Apache-2.0

package mqtt

import (
	"context"
	"strings"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/logging"
)

// command carries out a switch's message: OFF pauses the link's shaping
// (every link's on the daemon's switch) for pause_for, ON resumes it. A
// command the state already agrees with changes nothing. A retained
// command (one the broker kept from before this connection, e.g. from
// before a restart) is never carried out: a pause survives a restart by
// itself, and one that ended must not come back because a message
// stayed behind; it is logged against the state and removed.
func (p *publisher) command(ctx context.Context, c command) {
	link, ok := p.t.linkOfCommand(c.topic)
	if !ok {
		p.log.Warn("MQTT: ignoring a message on a topic that is no switch's", "topic", c.topic)
		return
	}
	what := "every link"
	if link != "" {
		what = link
	}
	payload := strings.ToUpper(strings.TrimSpace(c.payload))
	if payload == "" {
		return // a retained command removed (by us, after it came)
	}
	if payload != payloadOn && payload != payloadOff {
		p.log.Warn("MQTT: ignoring a switch command that is neither ON nor OFF", logging.KeyLink, what, "topic", c.topic, "payload", truncate(c.payload, 40))
		return
	}
	st := p.o.Daemon.Query(ctx, statusapi.Query{})
	now := switchState(pausedUntil(st, pauseLink(link)))
	if c.retained {
		p.retained(c, what, payload, now)
		return
	}
	if payload == now {
		p.log.Debug("MQTT: the switch asks for what is so already", logging.KeyLink, what, "payload", payload)
		return
	}
	change := statusapi.PauseChange{Link: link, By: By}
	if payload == payloadOff {
		change.For = time.Duration(p.s.PauseFor)
	}
	ctx, cancel := context.WithTimeout(ctx, pauseTimeout)
	defer cancel()
	if _, err := p.o.Daemon.SetPause(ctx, change); err != nil {
		verb := "resume"
		if change.For > 0 {
			verb = "pause"
		}
		p.log.Warn("MQTT: the switch's "+verb+" was refused", logging.KeyLink, what, logging.KeyError, err)
	}
}

// pauseLink is the key pausedUntil takes for link ("" every link).
func pauseLink(link string) string {
	if link == "" {
		return statusapi.AllLinks
	}
	return link
}

// retained logs a retained command against the state now, and removes it
// from the broker, so that it is not delivered again at every
// connection.
func (p *publisher) retained(c command, what, payload, now string) {
	asks := map[string]string{payloadOn: "shaping", payloadOff: "paused"}
	if payload == now {
		p.log.Info("MQTT: a retained switch command from before macake connected agrees with the state; nothing to do, and it is removed from the broker",
			logging.KeyLink, what, "topic", c.topic, "asks", asks[payload])
	} else {
		p.log.Warn("MQTT: ignoring a retained switch command from before macake connected: a pause survives a restart by itself, and a message left behind must not pause or resume the shaping; it is removed from the broker. Send it again, without retain, to act on it",
			logging.KeyLink, what, "topic", c.topic, "asks", asks[payload], "state", asks[now])
	}
	p.publishWait(c.topic, true, nil)
}
