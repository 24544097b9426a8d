// SPDX-License-Identifier: Apache-2.0

//go:build linux

package tc

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Observe reads the live state over rtnetlink, as Observe reads it with
// `ip` and `tc` (the same dumps iproute2 asks for, decoded as it decodes
// them for printing), without starting a process: one link dump, one
// qdisc dump, then classes and filters only where macake may own some.
// Each reading opens a socket of its own and closes it, so a socket that
// broke can never be reused.
func (n *Netlink) Observe(ctx context.Context, t Tools) (Live, error) {
	return n.observe(ctx, t, false)
}

func (n *Netlink) observe(ctx context.Context, t Tools, withStats bool) (Live, error) {
	live := Live{Tools: t, Devices: map[string]*DeviceState{}}
	if err := ctx.Err(); err != nil {
		return live, err
	}
	c, err := n.dialRead()
	if err != nil {
		return live, err
	}
	defer c.Close()
	if deadline, ok := ctx.Deadline(); ok {
		c.SetDeadline(deadline)
	}
	msgs, err := dump(c, unix.RTM_GETLINK, make([]byte, sizeofIfinfomsg))
	if err != nil {
		return live, fmt.Errorf("observing: netlink link dump: %w", err)
	}
	byIndex := map[int]string{}
	for _, m := range msgs {
		d, err := decodeLink(m.Data)
		if err != nil {
			return live, fmt.Errorf("observing: netlink link dump: %w", err)
		}
		live.Devices[d.Name] = &DeviceState{Device: d}
		byIndex[d.Index] = d.Name
	}
	devName := func(i int) string {
		if name, ok := byIndex[i]; ok {
			return name
		}
		return fmt.Sprintf("if%d", i)
	}
	if msgs, err = dump(c, unix.RTM_GETQDISC, make([]byte, sizeofTcmsg)); err != nil {
		return live, fmt.Errorf("observing: netlink qdisc dump: %w", err)
	}
	for _, m := range msgs {
		tm, _, err := parseTcmsg(m.Data)
		if err != nil {
			return live, fmt.Errorf("observing: netlink qdisc dump: %w", err)
		}
		d := live.Devices[byIndex[int(tm.ifindex)]]
		if d == nil {
			continue // a device that came after the link dump
		}
		q, err := decodeQdisc(m.Data, d.Name, withStats)
		if err != nil {
			return live, fmt.Errorf("observing: netlink qdisc dump: %w", err)
		}
		d.Qdiscs = append(d.Qdiscs, q)
	}
	if withStats {
		return live, nil
	}
	for _, name := range slices.Sorted(maps.Keys(live.Devices)) {
		d := live.Devices[name]
		if root := d.Root(); root != nil && root.Handle == RootHandle && (root.Kind == "htb" || root.Kind == "prio") {
			if root.Kind == "htb" {
				if msgs, err = dump(c, unix.RTM_GETTCLASS, tcmsgFor(d.Index, 0)); err != nil {
					return live, fmt.Errorf("observing: netlink class dump of %s: %w", name, err)
				}
				for _, m := range msgs {
					cl, err := decodeClass(m.Data)
					if err != nil {
						return live, fmt.Errorf("observing: netlink class dump of %s: %w", name, err)
					}
					d.Classes = append(d.Classes, cl)
				}
			}
			if _, isIFB := IFBSlot(name); !isIFB {
				if d.RootFilters, err = dumpFilters(c, d.Index, RootHandle, devName); err != nil {
					return live, fmt.Errorf("observing: netlink filter dump of %s: %w", name, err)
				}
			}
		}
		if d.Hook() != nil {
			if d.IngressFilters, err = dumpFilters(c, d.Index, ingressParent, devName); err != nil {
				return live, fmt.Errorf("observing: netlink ingress filter dump of %s: %w", name, err)
			}
		}
	}
	return live, nil
}

// ingressParent is what `tc filter show dev X ingress` asks for:
// TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS), which also finds an ingress
// qdisc's filters.
const ingressParent = 0xfffffff2

// tcmsgFor is a struct tcmsg naming a device and a parent.
func tcmsgFor(ifindex int, parent uint32) []byte {
	b := make([]byte, sizeofTcmsg)
	ne := binary.NativeEndian
	ne.PutUint32(b[4:], uint32(ifindex))
	ne.PutUint32(b[12:], parent)
	return b
}

func dumpFilters(c *netlink.Conn, ifindex int, parent uint32, devName func(int) string) ([]Filter, error) {
	msgs, err := dump(c, unix.RTM_GETTFILTER, tcmsgFor(ifindex, parent))
	if err != nil {
		return nil, err
	}
	out := make([]Filter, 0, len(msgs))
	for _, m := range msgs {
		f, err := decodeFilter(m.Data, devName)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// dump sends one dump request and returns its answers.
func dump(c *netlink.Conn, typ netlink.HeaderType, body []byte) ([]netlink.Message, error) {
	return c.Execute(netlink.Message{Header: netlink.Header{Type: typ, Flags: netlink.Request | netlink.Dump}, Data: body})
}

// dialRead opens a route socket in n's namespace for one reading.
func (n *Netlink) dialRead() (*netlink.Conn, error) {
	cfg := &netlink.Config{}
	if n.netns != "" {
		f, err := os.Open(filepath.Join("/run/netns", n.netns))
		if err != nil {
			return nil, fmt.Errorf("observing: netlink: network namespace %q: %w", n.netns, err)
		}
		defer f.Close()
		cfg.NetNS = int(f.Fd())
	}
	c, err := netlink.Dial(unix.NETLINK_ROUTE, cfg)
	if err != nil {
		return nil, fmt.Errorf("observing: opening an rtnetlink socket: %w", err)
	}
	return c, nil
}
