// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"context"
	"sync"
	"time"

	"github.com/macake/macake/execrun"
)

// SystemOptions configures the OS detector.
type SystemOptions struct {
	// SSID looks the Wi-Fi network name up (a short child process per
	// interface when its gateway changes; cached): ipconfig and
	// networksetup on macOS, iw on Linux. It is only a label; identity
	// is the gateway MAC.
	SSID bool
	// Runner runs those tools (default: execrun with a 3 s timeout).
	Runner execrun.Runner
	// ResolveGatewayMAC sends one UDP datagram to the gateway's discard
	// port when its MAC is not in the neighbour table yet, so the kernel
	// resolves it, and reads the table again.
	ResolveGatewayMAC bool
	// Do runs fn wherever the detector's sockets must be opened; tests
	// pass netns.Namespace.Do to detect inside a network namespace.
	// Default: runs fn directly.
	Do func(fn func() error) error
}

func (o *SystemOptions) defaults() {
	if o.Runner == nil {
		o.Runner = execrun.Exec{Timeout: 3 * time.Second}
	}
	if o.Do == nil {
		o.Do = func(fn func() error) error { return fn() }
	}
}

// ssidCache remembers SSIDs per interface and gateway, so that the tools
// run only when the network changes, and a name learned once survives a
// later redaction.
type ssidCache struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *ssidCache) lookup(ctx context.Context, f Facts, get func(ctx context.Context, iface string) string) map[string]string {
	out := map[string]string{}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	for _, i := range f.Interfaces {
		if !i.Up || !i.GatewayIP.IsValid() {
			continue
		}
		key := i.Name + "|" + i.GatewayIP.String() + "|" + i.GatewayMAC.String()
		s, ok := c.m[key]
		if !ok {
			s = get(ctx, i.Name)
			c.m[key] = s
		}
		if s != "" {
			out[i.Name] = s
		}
	}
	return out
}

func withSSIDs(f Facts, ssids map[string]string) Facts {
	for i := range f.Interfaces {
		if s := ssids[f.Interfaces[i].Name]; s != "" {
			f.Interfaces[i].SSID = s
		}
	}
	return f
}

// output runs argv and returns stdout, or "" on any failure: every SSID
// source is best effort.
func output(ctx context.Context, r execrun.Runner, argv ...string) string {
	res, err := r.Run(ctx, execrun.Command{Argv: argv})
	if err != nil || res.ExitCode != 0 {
		return ""
	}
	return string(res.Stdout)
}
