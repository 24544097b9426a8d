// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"fmt"
	"time"

	"github.com/macake/macake/backend"
)

// The environment variables that override the tc backend's tool paths
// (ToolsFromEnv) and its use of netlink.
const (
	EnvTC      = "MACAKE_TC"
	EnvIP      = "MACAKE_IP"
	EnvUnshare = "MACAKE_UNSHARE"
	// EnvNetlink = "off" makes the backend run `tc` for every rate change
	// instead of writing it over netlink (a kernel or sandbox that
	// refuses rtnetlink; the benchmark's process-per-change model).
	EnvNetlink = "MACAKE_NETLINK"
)

// commandTimeout bounds one tc or ip child. They answer in milliseconds;
// the capability probe creates a network namespace, which takes longer on
// a busy machine.
const commandTimeout = 10 * time.Second

func init() {
	backend.Register(backend.Registration{
		Name: "tc", Target: "linux", Limits: Limits, Claims: claims, Open: open,
	})
}

// claims: tc is Linux's shaper.
func claims(goos string, _ func(string) string) backend.Claim {
	if goos == "linux" {
		return backend.ClaimSystem
	}
	return backend.NoClaim
}

// open is the tc backend's opener: tc and ip must be there unless cfg
// brings a Runner; rate changes go over netlink where the kernel takes
// it, so that none starts a process.
func open(cfg backend.Config) (backend.Backend, error) {
	tools := ToolsFromEnv(cfg.Env)
	run, err := backend.ToolRunner(cfg, commandTimeout, []backend.Tool{
		{Name: "tc", Path: tools.TC, Hint: fmt.Sprintf("macake needs iproute2's tc on Linux: apt-get install iproute2; %s overrides the path", EnvTC)},
		{Name: "ip", Path: tools.IP, Hint: fmt.Sprintf("macake needs iproute2's ip on Linux: apt-get install iproute2; %s overrides the path", EnvIP)},
	})
	if err != nil {
		return nil, err
	}
	b := &Backend{Runner: run, Tools: tools}
	if cfg.Store != nil {
		b.Owners = cfg.Store
	}
	if cfg.Runner == nil && NetlinkAvailable && cfg.Env(EnvNetlink) != "off" {
		b.Netlink = NewNetlink(tools.Netns)
	}
	return b, nil
}
