// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/nsenter"
)

// ChildEnv is set (to the namespace name) in the environment of a test
// binary that RunTest re-executed inside a namespace.
const ChildEnv = "MACAKE_NETNS_CHILD"

// InChild reports whether this process is a test binary re-executed by
// RunTest; the named test then does the in-namespace half of its work.
func InChild() bool { return os.Getenv(ChildEnv) != "" }

// Lab owns the namespaces of one test.
type Lab struct {
	tb     testing.TB
	prefix string
	run    execrun.Exec
	mu     sync.Mutex
	n      int
}

var labCount atomic.Int64

// New returns a Lab whose namespaces are named macake-PREFIX-PID-N-NAME and
// removed in tb's Cleanup. It skips the test when not root, when ip(8) is
// missing, or when namespaces cannot be created here.
func New(tb testing.TB, prefix string) *Lab {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("skipping: network-namespace test needs root (CI runs as root; locally: sudo go test)")
	}
	if _, err := lookPath("ip"); err != nil {
		tb.Skip("skipping: ip(8) not found (apt-get install iproute2)")
	}
	l := &Lab{tb: tb, prefix: fmt.Sprintf("macake-%s-%d-%d", prefix, os.Getpid(), labCount.Add(1)), run: execrun.Exec{Timeout: 30 * time.Second}}
	return l
}

// lookPath finds a program in PATH (and the sbin directories root's PATH
// may lack) without os/exec.
func lookPath(name string) (string, error) {
	dirs := append(filepath.SplitList(os.Getenv("PATH")), "/usr/sbin", "/sbin", "/usr/bin", "/bin")
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH", name)
}

// Require skips the test when a program the test needs is missing, naming
// the Debian package to install.
func (l *Lab) Require(program, pkg string) {
	l.tb.Helper()
	if _, err := lookPath(program); err != nil {
		l.tb.Skipf("skipping: %s not found (apt-get install %s)", program, pkg)
	}
}

// Run runs argv (in the root namespace) and fails the test on error.
func (l *Lab) Run(argv ...string) string {
	l.tb.Helper()
	out, err := l.exec(context.Background(), "", argv...)
	if err != nil {
		l.tb.Fatal(err)
	}
	return out
}

func (l *Lab) exec(ctx context.Context, stdin string, argv ...string) (string, error) {
	cmd := execrun.Command{Argv: argv, Stdin: stdin}
	res, err := l.run.Run(ctx, cmd)
	res, err = execrun.Check(cmd, res, err)
	return string(res.Stdout), err
}

// Namespace is one network namespace of a Lab.
type Namespace struct {
	lab  *Lab
	name string
	fd   int
}

// Namespace creates a namespace with loopback up and unprivileged ICMP
// allowed for every group (net.ipv4.ping_group_range "0 2147483647").
func (l *Lab) Namespace(name string) *Namespace {
	l.tb.Helper()
	l.mu.Lock()
	l.n++
	full := fmt.Sprintf("%s-%s", l.prefix, name)
	l.mu.Unlock()
	if _, err := l.exec(context.Background(), "", "ip", "netns", "add", full); err != nil {
		l.tb.Skipf("skipping: cannot create a network namespace here: %v", err)
	}
	ns := &Namespace{lab: l, name: full, fd: -1}
	l.tb.Cleanup(func() {
		if ns.fd >= 0 {
			unix.Close(ns.fd)
		}
		if _, err := l.exec(context.Background(), "", "ip", "netns", "del", full); err != nil {
			l.tb.Errorf("cleanup: %v", err)
		}
	})
	fd, err := nsenter.Open(full)
	if err != nil {
		l.tb.Fatal(err)
	}
	ns.fd = fd
	ns.IP("link", "set", "lo", "up")
	ns.Sysctl("net.ipv4.ping_group_range", "0 2147483647")
	return ns
}

// Name returns the namespace's name as `ip netns` knows it.
func (ns *Namespace) Name() string { return ns.name }

// IP runs `ip -n NAME args...` and fails the test on error.
func (ns *Namespace) IP(args ...string) string {
	ns.lab.tb.Helper()
	return ns.lab.Run(append([]string{"ip", "-n", ns.name}, args...)...)
}

// TC runs `tc -n NAME args...` and fails the test on error.
func (ns *Namespace) TC(args ...string) string {
	ns.lab.tb.Helper()
	return ns.lab.Run(append([]string{"tc", "-n", ns.name}, args...)...)
}

// Sysctl sets a sysctl inside the namespace (net.* keys are per namespace)
// and fails the test on error.
func (ns *Namespace) Sysctl(key, value string) {
	ns.lab.tb.Helper()
	err := ns.Do(func() error {
		return os.WriteFile(procSysPath(key), []byte(value+"\n"), 0o644)
	})
	if err != nil {
		ns.lab.tb.Fatalf("sysctl %s=%q in %s: %v", key, value, ns.name, err)
	}
}

// ReadSysctl reads a sysctl inside the namespace.
func (ns *Namespace) ReadSysctl(key string) (string, error) {
	var v []byte
	err := ns.Do(func() (err error) {
		v, err = os.ReadFile(procSysPath(key))
		return err
	})
	return strings.TrimSpace(string(v)), err
}

// AddAddr adds an address (CIDR) to dev. IPv6 addresses skip duplicate
// address detection so they are usable at once.
func (ns *Namespace) AddAddr(dev, cidr string) {
	ns.lab.tb.Helper()
	args := []string{"addr", "add", cidr, "dev", dev}
	if strings.Contains(cidr, ":") {
		args = append(args, "nodad")
	}
	ns.IP(args...)
}

// Route runs `ip route replace ARGS...` (e.g. "default", "via", "10.0.0.1").
func (ns *Namespace) Route(args ...string) {
	ns.lab.tb.Helper()
	family := []string{}
	for _, a := range args {
		if strings.Contains(a, ":") {
			family = []string{"-6"}
			break
		}
	}
	ns.IP(append(append(family, "route", "replace"), args...)...)
}

// Forward turns IPv4 and IPv6 forwarding on, making the namespace a router.
func (ns *Namespace) Forward() {
	ns.lab.tb.Helper()
	ns.Sysctl("net.ipv4.ip_forward", "1")
	ns.Sysctl("net.ipv6.conf.all.forwarding", "1")
}

// Link connects two namespaces with a veth pair, aDev in a and bDev in b,
// brings both ends up and turns TSO, GSO and GRO off on both, so queues
// hold wire-sized packets. It skips the test when ethtool is missing.
func (l *Lab) Link(a *Namespace, aDev string, b *Namespace, bDev string) {
	l.tb.Helper()
	l.Require("ethtool", "ethtool")
	l.Run("ip", "link", "add", aDev, "netns", a.name, "type", "veth", "peer", "name", bDev, "netns", b.name)
	for _, end := range []struct {
		ns  *Namespace
		dev string
	}{{a, aDev}, {b, bDev}} {
		end.ns.DisableOffloads(end.dev)
		end.ns.IP("link", "set", end.dev, "up")
	}
}

// DisableOffloads turns TSO, GSO and GRO off on dev.
func (ns *Namespace) DisableOffloads(dev string) {
	ns.lab.tb.Helper()
	ns.Exec("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
}

// HardwareAddr returns dev's MAC address.
func (ns *Namespace) HardwareAddr(dev string) net.HardwareAddr {
	ns.lab.tb.Helper()
	var mac net.HardwareAddr
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	})
	if err != nil {
		ns.lab.tb.Fatalf("%s in %s: %v", dev, ns.name, err)
	}
	return mac
}

// Exec runs argv inside the namespace (`ip netns exec`) and fails the test
// on error; it returns stdout.
func (ns *Namespace) Exec(argv ...string) string {
	ns.lab.tb.Helper()
	out, err := ns.ExecContext(context.Background(), nil, argv...)
	if err != nil {
		ns.lab.tb.Fatal(err)
	}
	return out
}

// ExecContext runs argv inside the namespace with extra environment
// variables and returns stdout, or an *execrun.Error carrying stderr.
// `ip netns exec` also mounts the namespace's own /sys, so sysfs shows the
// namespace's devices.
func (ns *Namespace) ExecContext(ctx context.Context, env []string, argv ...string) (string, error) {
	r := ns.lab.run
	r.Env = env
	if dl, ok := ctx.Deadline(); ok {
		r.Timeout = time.Until(dl)
	}
	cmd := execrun.Command{Argv: append([]string{"ip", "netns", "exec", ns.name}, argv...)}
	res, err := r.Run(ctx, cmd)
	res, err = execrun.Check(cmd, res, err)
	out := string(res.Stdout)
	if err != nil {
		return out + string(res.Stderr), err
	}
	return out, nil
}

// RunTest re-executes the running test binary inside the namespace,
// running only the test named test (anchored), with env added and
// ChildEnv set. It returns the child's output (its -test.v log) and an
// error when the child failed. The child's test checks [InChild] to know
// it is the in-namespace half.
func (ns *Namespace) RunTest(ctx context.Context, test string, env ...string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the test binary: %w", err)
	}
	env = append(env, ChildEnv+"="+ns.name)
	return ns.ExecContext(ctx, env, exe, "-test.run=^"+test+"$", "-test.count=1", "-test.v")
}

// Do runs fn on an OS thread switched into the namespace. Sockets created
// inside fn belong to the namespace for their whole life, wherever they
// are used afterwards; goroutines started inside fn do not inherit it.
// Paths under /proc/sys/net follow the thread too, but /sys/class/net
// does not (it shows the namespace that mounted it): read sysfs through
// RunTest or ExecContext instead.
func (ns *Namespace) Do(fn func() error) error { return nsenter.DoFD(ns.fd, ns.name, fn) }

// Listen opens a listener inside the namespace; lc may be nil.
func (ns *Namespace) Listen(lc *net.ListenConfig, network, address string) (net.Listener, error) {
	if lc == nil {
		lc = &net.ListenConfig{}
	}
	var l net.Listener
	err := ns.Do(func() (err error) {
		l, err = lc.Listen(context.Background(), network, address)
		return err
	})
	return l, err
}

// ListenPacket opens a packet socket inside the namespace.
func (ns *Namespace) ListenPacket(network, address string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := ns.Do(func() (err error) {
		pc, err = net.ListenPacket(network, address)
		return err
	})
	return pc, err
}

// Dial connects from inside the namespace; d may be nil. It suits
// http.Transport.DialContext.
func (ns *Namespace) Dial(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
	if d == nil {
		d = &net.Dialer{}
	}
	var c net.Conn
	err := ns.Do(func() (err error) {
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// Bottleneck is an htb class at a rate with a bfifo leaf limited in bytes:
// a drop-tail queue like the bloated buffer of an ISP's modem.
type Bottleneck struct {
	ns    *Namespace
	dev   string
	limit int64
}

// Bottleneck shapes dev's egress to rateBits with a bfifo of limitBytes
// (for bufferbloat, about one second of the rate: rateBits/8).
func (ns *Namespace) Bottleneck(dev string, rateBits, limitBytes int64) *Bottleneck {
	ns.lab.tb.Helper()
	ns.TC("qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1")
	ns.TC("class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", Rate(rateBits), "ceil", Rate(rateBits))
	ns.TC("qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "bfifo", "limit", fmt.Sprint(limitBytes))
	return &Bottleneck{ns: ns, dev: dev, limit: limitBytes}
}

// IngressBottleneck shapes what dev receives: its ingress is redirected
// (u32 match-all, mirred) to a new IFB device named ifb, which gets the
// bottleneck. ifb must be a valid device name unique in the namespace.
func (ns *Namespace) IngressBottleneck(dev, ifb string, rateBits, limitBytes int64) *Bottleneck {
	ns.lab.tb.Helper()
	ns.IP("link", "add", ifb, "type", "ifb")
	ns.DisableOffloads(ifb)
	ns.IP("link", "set", ifb, "up")
	ns.TC("qdisc", "add", "dev", dev, "handle", "ffff:", "ingress")
	ns.TC("filter", "add", "dev", dev, "parent", "ffff:", "protocol", "all", "u32", "match", "u32", "0", "0",
		"action", "mirred", "egress", "redirect", "dev", ifb)
	return ns.Bottleneck(ifb, rateBits, limitBytes)
}

// SetRate changes the bottleneck's rate; the queue keeps its contents. It
// returns an error instead of failing the test so that a goroutine
// replaying a trace may call it.
func (b *Bottleneck) SetRate(ctx context.Context, rateBits int64) error {
	_, err := b.ns.lab.exec(ctx, "", "tc", "-n", b.ns.name, "class", "change", "dev", b.dev, "parent", "1:", "classid", "1:1",
		"htb", "rate", Rate(rateBits), "ceil", Rate(rateBits))
	return err
}

// SetRates replays rates, one every step (one tc child per change, a few
// milliseconds each); it returns when done or when ctx ends.
func (b *Bottleneck) SetRates(ctx context.Context, step time.Duration, rates []int64) error {
	for _, r := range rates {
		if err := b.SetRate(ctx, r); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(step):
		}
	}
	return nil
}

// Device returns the shaped device's name.
func (b *Bottleneck) Device() string { return b.dev }

// Limit returns the queue's size in bytes.
func (b *Bottleneck) Limit() int64 { return b.limit }

// CubicListenConfig returns a ListenConfig whose sockets (and the
// connections they accept) use CUBIC congestion control. A new namespace
// defaults to BBR, which keeps queues short and would hide the very
// bufferbloat a test wants to create.
func CubicListenConfig() *net.ListenConfig {
	return &net.ListenConfig{Control: nsenter.Cubic}
}

// CubicDialer returns a Dialer whose sockets use CUBIC congestion control.
func CubicDialer() *net.Dialer { return &net.Dialer{Control: nsenter.Cubic} }

// procSysPath maps a sysctl key ("net.ipv4.ping_group_range") to its
// /proc/sys path.
func procSysPath(key string) string {
	return "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
}
