// SPDX-License-Identifier: Apache-2.0

//go:build linux

package tc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	gotc "github.com/florianl/go-tc"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/macake/macake/shape"
)

// NetlinkAvailable is true where the kernel can be written over netlink.
const NetlinkAvailable = true

// Netlink writes the controller's rate changes to the kernel over one
// long-lived rtnetlink socket (github.com/florianl/go-tc), so a rate change
// starts no process: htb class change plus bfifo qdisc change, or one
// change of the CAKE leaf. Everything else (creating and removing shapers, filters
// and IFB devices, reading the live state) stays with tc and ip, whose
// batches the plan shows command by command.
//
// A socket that errs is closed and opened afresh on the next call; the
// error goes back to the caller, whose next decision (or the reconciler's
// repair) tries again. It is safe for concurrent use.
type Netlink struct {
	netns string

	mu   sync.Mutex
	conn *gotc.Tc
	// index caches interface indexes by name; an error naming a missing
	// device drops the entry.
	index map[string]uint32
	ticks float64
}

// NewNetlink returns a writer acting in the named network namespace (""
// is the caller's). It opens its socket, and reads the scheduler clock the
// burst is converted with, on first use.
func NewNetlink(netns string) *Netlink {
	return &Netlink{netns: netns, index: map[string]uint32{}}
}

// open dials the socket; n.mu is held.
func (n *Netlink) open() error {
	if n.ticks == 0 {
		b, err := os.ReadFile("/proc/net/psched")
		if err != nil {
			return fmt.Errorf("netlink: %w", err)
		}
		if n.ticks, err = parsePsched(string(b)); err != nil {
			return fmt.Errorf("netlink: %w", err)
		}
	}
	cfg := &gotc.Config{}
	if n.netns != "" {
		f, err := os.Open(filepath.Join("/run/netns", n.netns))
		if err != nil {
			return fmt.Errorf("netlink: network namespace %q: %w", n.netns, err)
		}
		defer f.Close()
		cfg.NetNS = int(f.Fd())
	}
	c, err := gotc.Open(cfg)
	if err != nil {
		return fmt.Errorf("netlink: opening the rtnetlink socket: %w", err)
	}
	// Extended acks carry the kernel's own message ("Qdisc not found…").
	_ = c.SetOption(netlink.ExtendedAcknowledge, true)
	n.conn = c
	return nil
}

// Close closes the socket.
func (n *Netlink) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		return nil
	}
	err := n.conn.Close()
	n.conn = nil
	return err
}

// setRate changes the rate (and the bfifo limit) of s's live shaper.
func (n *Netlink) setRate(ctx context.Context, s shaperSpec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		if err := n.open(); err != nil {
			return err
		}
	}
	err := n.change(s)
	if errors.Is(err, unix.ENODEV) {
		// The device went away, or came back under another index.
		delete(n.index, s.dev)
		err = n.change(s)
	}
	if err == nil || errors.Is(err, errNoDevice) {
		return err
	}
	var op *netlink.OpError
	if !errors.As(err, &op) || errors.Is(err, unix.ENOBUFS) || errors.Is(err, syscall.EBADF) {
		// Not the kernel's answer to this request: the socket itself is
		// in doubt. Start afresh next time.
		n.conn.Close()
		n.conn = nil
	}
	return err
}

// change looks up s's device and changes its shaper; n.mu is held.
func (n *Netlink) change(s shaperSpec) error {
	idx, err := n.ifindex(s.dev)
	if err != nil {
		return err
	}
	if s.cake {
		return n.changeCake(idx, s)
	}
	return n.changeHTB(idx, s)
}

// changeHTB changes the bfifo leaf first: when the class is gone, so is
// its leaf, and the change fails without creating anything (go-tc's class
// call creates a missing class).
func (n *Netlink) changeHTB(idx uint32, s shaperSpec) error {
	limit := uint32(max(s.pipe.QueueBytes, 0))
	leaf := gotc.Object{
		Msg:       gotc.Msg{Family: unix.AF_UNSPEC, Ifindex: idx, Handle: LeafHandle, Parent: ClassHandle},
		Attribute: gotc.Attribute{Kind: "bfifo", Bfifo: &gotc.FifoOpt{Limit: limit}},
	}
	if err := n.conn.Qdisc().Change(&leaf); err != nil {
		return fmt.Errorf("netlink: bfifo %s limit %d on %s: %w", FormatHandle(LeafHandle), limit, s.dev, err)
	}
	p := htbParamsFor(s, n.ticks)
	spec := gotc.RateSpec{
		CellLog: p.CellLog, Linklayer: linklayerEthernet, Overhead: p.Overhead,
		CellAlign: p.CellAlign, Mpu: p.MPU, Rate: p.Rate32(),
	}
	h := &gotc.Htb{Parms: &gotc.HtbOpt{Rate: spec, Ceil: spec, Buffer: p.Buffer, Cbuffer: p.Buffer, Quantum: p.Quantum}}
	if p.NeedsRate64() {
		r := p.RateBytes
		h.Rate64, h.Ceil64 = &r, &r
	}
	class := gotc.Object{
		Msg:       gotc.Msg{Family: unix.AF_UNSPEC, Ifindex: idx, Handle: ClassHandle, Parent: RootHandle},
		Attribute: gotc.Attribute{Kind: "htb", Htb: h},
	}
	if err := n.conn.Class().Replace(&class); err != nil {
		return fmt.Errorf("netlink: htb class %s rate %s on %s: %w", FormatHandle(ClassHandle), shape.FormatRate(s.pipe.RateBits), s.dev, err)
	}
	return nil
}

func (n *Netlink) changeCake(idx uint32, s shaperSpec) error {
	p, err := cakeParamsFor(s)
	if err != nil {
		return err
	}
	c := &gotc.Cake{
		BaseRate: &p.RateBytes, FlowMode: &p.FlowMode, Atm: &p.ATM,
		Nat: &p.NAT, Wash: &p.Wash, SplitGso: &p.SplitGSO, AckFilter: &p.AckFilter, Ingress: &p.Ingress,
		Rtt: &p.RTT, Target: &p.Target,
	}
	if p.SendDiffserv {
		c.DiffServMode = &p.Diffserv
	}
	if p.Memory != 0 {
		c.Memory = &p.Memory
	}
	ov := uint32(p.Overhead)
	c.Overhead = &ov
	if p.Raw {
		zero := uint32(0)
		c.Raw = &zero
	} else if p.MPU != 0 {
		c.Mpu = &p.MPU
	}
	q := gotc.Object{
		Msg:       gotc.Msg{Family: unix.AF_UNSPEC, Ifindex: idx, Handle: LeafHandle, Parent: CakeClass},
		Attribute: gotc.Attribute{Kind: "cake", Cake: c},
	}
	if err := n.conn.Qdisc().Change(&q); err != nil {
		return fmt.Errorf("netlink: cake %s bandwidth %s on %s: %w", FormatHandle(LeafHandle), shape.FormatRate(s.pipe.RateBits), s.dev, err)
	}
	return nil
}

// ifindex returns dev's interface index, asking the kernel the first time
// (RTM_GETLINK by name, in n's namespace); n.mu is held.
func (n *Netlink) ifindex(dev string) (uint32, error) {
	if i, ok := n.index[dev]; ok {
		return i, nil
	}
	cfg := &netlink.Config{}
	if n.netns != "" {
		f, err := os.Open(filepath.Join("/run/netns", n.netns))
		if err != nil {
			return 0, fmt.Errorf("netlink: network namespace %q: %w", n.netns, err)
		}
		defer f.Close()
		cfg.NetNS = int(f.Fd())
	}
	c, err := netlink.Dial(unix.NETLINK_ROUTE, cfg)
	if err != nil {
		return 0, fmt.Errorf("netlink: %w", err)
	}
	defer c.Close()
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.IFLA_IFNAME, dev)
	attrs, err := ae.Encode()
	if err != nil {
		return 0, err
	}
	req := netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETLINK, Flags: netlink.Request},
		Data:   append(make([]byte, unix.SizeofIfInfomsg), attrs...),
	}
	msgs, err := c.Execute(req)
	if err != nil {
		if errors.Is(err, unix.ENODEV) {
			return 0, fmt.Errorf("netlink: %w %q: %w", errNoDevice, dev, err)
		}
		return 0, fmt.Errorf("netlink: looking up %q: %w", dev, err)
	}
	if len(msgs) != 1 || len(msgs[0].Data) < unix.SizeofIfInfomsg {
		return 0, fmt.Errorf("netlink: looking up %q: unexpected answer", dev)
	}
	d := msgs[0].Data
	i := binary.NativeEndian.Uint32(d[4:8]) // struct ifinfomsg's ifi_index
	n.index[dev] = i
	return i, nil
}

// linklayerEthernet is TC_LINKLAYER_ETHERNET: tc's default, which makes
// the kernel compute transmit times itself (no rate table needed).
const linklayerEthernet = 1
