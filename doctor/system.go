// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/service"
	"github.com/macake/macake/shape"
)

// System is everything doctor looks at, each behind a small seam. Production
// fills it with the real thing (see the cmd/macake doctor command); tests
// with fakes and the pf/dummynet emulator.
type System struct {
	// GOOS and GOARCH name the platform; OSVersion describes the
	// operating system, e.g. "macOS 15.1" or "Linux 6.12.0".
	GOOS, GOARCH, OSVersion string
	// EUID is the effective user id; Groups the effective group id and the
	// supplementary groups (Linux ping sockets check all of them).
	EUID   int
	Groups []int
	// Getenv reads the environment (MACAKE_BACKEND, MACAKE_PFCTL, …).
	Getenv func(string) string

	// ConfigDir is the policy directory (links.d). StateDir is the state
	// directory given on the command line; when StateDirIsDefault is set,
	// macake.toml's state_dir replaces it, as apply and watch do.
	ConfigDir         string
	StateDir          string
	StateDirIsDefault bool

	// Runner runs every read-only command of the backends: pfctl, dnctl,
	// tc, ip. It never changes anything through it.
	Runner execrun.Runner
	// FS answers ownership and mode questions and reads the service
	// files (service.OSFiles, or servicetest.Files in tests).
	FS FS
	// Facts tells which network the machine is on (linkfacts).
	Facts linkfacts.Source
	// Counters reads interface byte counters; CounterWait is how long to
	// wait between the two readings that tell whether they move, and Sleep
	// waits (nil: a real timer; tests do not wait).
	Counters    ifstat.Reader
	CounterWait time.Duration
	Sleep       func(ctx context.Context, d time.Duration) error
	// ICMP opens (and closes) ICMP sockets, to test the permission
	// without sending anything.
	ICMP ICMPOpener
	// PingGroupRange reads net.ipv4.ping_group_range (Linux), e.g. "0
	// 2147483647".
	PingGroupRange func() (string, error)
	// Pinger sends a few echo requests to each reflector.
	Pinger Pinger
	// TCCapabilities probes the Linux kernel's qdiscs (tc.Probe).
	TCCapabilities func(ctx context.Context) tc.Capabilities
	// Launchctl runs `launchctl print` (macOS).
	Launchctl execrun.Runner
	// Watch tells whether `macake watch` runs, from the state lock.
	Watch WatchProbe
	// AskWatch asks the running `macake watch` for its status over its
	// socket (statusapi.Fetch on STATE_DIR/watch.sock); nil means it
	// cannot be asked.
	AskWatch func(ctx context.Context, stateDir string) (statusapi.Status, error)
	// Now is the clock, for how long ago the daemon did things (nil:
	// time.Now).
	Now func() time.Time
}

// invocation is how doctor was run: the directories every command a fix
// names must repeat.
func (s System) invocation() config.Invocation {
	var i config.Invocation
	if s.ConfigDir != config.DefaultConfigDir {
		i.ConfigDir = s.ConfigDir
	}
	if !s.StateDirIsDefault {
		i.StateDir = s.StateDir
	}
	return i
}

// FS is the file-system view doctor needs: service.Files' read side.
type FS interface {
	Stat(path string) (service.FileInfo, error)
	ReadFile(path string) ([]byte, error)
}

// ICMPOpener opens an ICMP socket of network ("udp4", "udp6" for
// unprivileged datagram sockets, "ip4:icmp", "ip6:ipv6-icmp" for raw ones)
// and closes it again, reporting whether the system allowed it.
type ICMPOpener interface {
	Open(network string) error
}

// Echo is what a few echo requests to one reflector got back.
type Echo struct {
	Target netip.Addr
	// Interface is the interface the probes left by ("" when they
	// followed the routing table).
	Interface string
	Sent      int
	Received  int
	// RTT is the median round-trip time of the replies.
	RTT time.Duration
	// Err says why probes could not be sent (unreachable), when they could
	// not.
	Err string
}

// Pinger sends a few probes to each target (ICMP echo, or the target's
// TCP or UDP probe) through interface iface ("" follows the routing
// table), as that link's controller probes them, and reports the replies.
type Pinger interface {
	Ping(ctx context.Context, iface string, targets []shape.Reflector) ([]Echo, error)
}

// WatchState says whether `macake watch` runs for a state directory.
type WatchState struct {
	Running bool
	// PID is the process holding the state lock; 0 when unknown.
	PID int
	// Holder is what the lock holder says it is ("watch" for the daemon,
	// "" for a one-shot command or a macake that does not say).
	Holder string
	// Via names how this was found, e.g. "the state lock".
	Via string
}

// WatchProbe finds a running `macake watch`.
type WatchProbe interface {
	Watch(ctx context.Context, stateDir string) (WatchState, error)
}

// lazy computes a value once, on first use, even when several goroutines
// ask at the same time.
type lazy[T any] struct {
	once sync.Once
	v    T
}

func (l *lazy[T]) get(f func() T) T {
	l.once.Do(func() { l.v = f() })
	return l.v
}
