// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/config/settings"
)

// TestWatchKeepsItsPaceWithABrokerThatNeverAnswers: the MQTT publisher
// runs beside a busy watch against a broker that accepts the connection
// and never answers (and one that answers the connection, then nothing
// more): it retries with backoff and says why, home's controller ticks
// once a second and reads its counters every 200 ms throughout, and
// watch stops within 3 s (the publisher waits at most 2 s to say
// offline).
func TestWatchKeepsItsPaceWithABrokerThatNeverAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		connack bool
		logged  string
	}{
		{"silent", false, "cannot connect to the broker"},
		{"silent after the connection", true, "lost the connection to the broker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The broker: the far end of a pipe that takes every byte
				// and answers nothing (but the CONNACK, when asked).
				var dials atomic.Int32
				var mu sync.Mutex
				var brokers []net.Conn
				// Once watch has stopped, the broker hangs up, so that the
				// client's goroutines that a publisher which stopped waiting
				// left behind (a connection attempt waiting for a CONNACK,
				// paho's disconnect waiting for it) end inside the bubble.
				defer func() {
					mu.Lock()
					for _, c := range brokers {
						c.Close()
					}
					mu.Unlock()
					synctest.Wait()
				}()
				dial := func(*url.URL) (net.Conn, error) {
					dials.Add(1)
					near, far := net.Pipe()
					mu.Lock()
					brokers = append(brokers, far)
					mu.Unlock()
					go func() {
						if tc.connack {
							buf := make([]byte, 512)
							far.Read(buf) // the CONNECT
							far.Write([]byte{0x20, 0x02, 0x00, 0x00})
						}
						io.Copy(io.Discard, far)
					}()
					return near, nil
				}
				r := newRigWith(t, twoLinks, nil, twoInterfaces(), nil, func(c *Config) {
					c.Settings.MQTT = settings.MQTTDefaults
					c.Settings.MQTT.Broker, c.Settings.MQTT.Control = "mqtt://broker.invalid", true
					c.MQTTDial = dial
				})
				r.bloat(150*time.Millisecond, 50_000_000)
				time.Sleep(5 * time.Second)
				synctest.Wait()

				home := func() (ticks, loads uint64) {
					c := r.d.ctls.runners["home"].loop.State().Counters
					return c.Ticks, c.LoadSamples
				}
				ticks0, loads0 := home()
				const window = 2 * time.Minute
				time.Sleep(window)
				ticks1, loads1 := home()
				stopAt := time.Now()
				r.stop()
				if took := time.Since(stopAt); took > 3*time.Second {
					t.Errorf("watch took %v to stop: the publisher held it up", took)
				}
				t.Logf("over %v: %d connections to the broker; home ticked %d times, read its counters %d times", window, dials.Load(), ticks1-ticks0, loads1-loads0)
				if got := ticks1 - ticks0; got < uint64(window/time.Second)-1 {
					t.Errorf("home's controller ticked %d times in %v: it lost its pace", got, window)
				}
				if got := loads1 - loads0; got < uint64(window/(200*time.Millisecond))*9/10 {
					t.Errorf("home's controller read its counters %d times in %v: it lost its pace", got, window)
				}
				if n := dials.Load(); n < 3 || n > 20 {
					t.Errorf("%d connections in %v: want a few, retried with backoff", n, window)
				}
				if !strings.Contains(r.log.String(), tc.logged) {
					t.Errorf("the log does not say %q:\n%s", tc.logged, r.log.String())
				}
			})
		})
	}
}
