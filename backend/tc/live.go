// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/macake/macake/execrun"
)

// Live is the observed system: every device with its qdiscs and, where
// macake may own something, its classes and filters. Diff reads nothing
// else.
type Live struct {
	// Tools are the programs the plan's commands will name.
	Tools Tools
	// Caps is what the kernel supports.
	Caps Capabilities
	// Devices maps device name to its state.
	Devices map[string]*DeviceState
	// OwnedRoots are the interfaces whose root qdisc macake created (the
	// Ownership record, plus every interface where macake's root is live).
	// A foreign root on one of them replaced macake's shaper: Diff
	// restores it. A foreign root elsewhere is never touched.
	OwnedRoots map[string]bool
	// OwnedHooks are the interfaces whose ingress qdisc macake added (the
	// Ownership record, kept only while an ingress qdisc is live there).
	// Only these are deleted when macake lets go; any other ingress qdisc
	// was there first and stays.
	OwnedHooks map[string]bool
	// CakeRefusals are the CAKE option sets the kernel or iproute2
	// refused when tried (by cakeTrialKey): the directions that want one
	// are left as they are, with a warning.
	CakeRefusals map[string]CakeRefusal
}

// DeviceState is one device and the tc objects on it.
type DeviceState struct {
	Device
	Qdiscs []Qdisc
	// Classes are read only when macake's htb root is on the device.
	Classes []Class
	// RootFilters are the filters attached to macake's htb or prio root
	// (the egress probe exemptions).
	RootFilters []Filter
	// IngressFilters are the filters on the ingress hook, read only when
	// the device has an ingress or clsact qdisc.
	IngressFilters []Filter
}

// Root returns the device's root qdisc, nil when none is listed.
func (d *DeviceState) Root() *Qdisc {
	if d == nil {
		return nil
	}
	for i := range d.Qdiscs {
		if d.Qdiscs[i].Root {
			return &d.Qdiscs[i]
		}
	}
	return nil
}

// Hook returns the device's ingress or clsact qdisc, nil when none.
func (d *DeviceState) Hook() *Qdisc {
	if d == nil {
		return nil
	}
	for i := range d.Qdiscs {
		if k := d.Qdiscs[i].Kind; (k == "ingress" || k == "clsact") && d.Qdiscs[i].Handle == IngressHandle {
			return &d.Qdiscs[i]
		}
	}
	return nil
}

// Leaf returns the qdisc attached to a class, nil when none is listed.
func (d *DeviceState) Leaf(class uint32) *Qdisc {
	for i := range d.Qdiscs {
		if !d.Qdiscs[i].Root && d.Qdiscs[i].Parent == class {
			return &d.Qdiscs[i]
		}
	}
	return nil
}

// Class returns the class with the given handle, nil when absent.
func (d *DeviceState) Class(h uint32) *Class {
	for i := range d.Classes {
		if d.Classes[i].Handle == h {
			return &d.Classes[i]
		}
	}
	return nil
}

// ownsRoot reports whether macake's root qdisc is on the device.
func (d *DeviceState) ownsRoot() bool {
	r := d.Root()
	return r != nil && r.Handle == RootHandle
}

// rootLayout names how a root qdisc of macake's handle is built, as
// shaperSpec.layout names what a shaper wants: "htb+bfifo" (htb, class
// 4d4b:1, bfifo 4d4c:) or "prio+cake" (prio, CAKE 4d4c: in band 4d4b:2);
// any other kind is its own name (an older macake put cake itself at the
// root).
func rootLayout(root *Qdisc) string {
	switch root.Kind {
	case "htb":
		return "htb+bfifo"
	case "prio":
		return "prio+cake"
	}
	return root.Kind
}

// cakeLeaf returns the CAKE leaf under macake's prio root, nil when there
// is none.
func (d *DeviceState) cakeLeaf() *Qdisc {
	if r := d.Root(); r == nil || r.Handle != RootHandle || r.Kind != "prio" {
		return nil
	}
	if l := d.Leaf(CakeClass); l != nil && l.Kind == "cake" && l.Handle == LeafHandle {
		return l
	}
	return nil
}

// Observe reads the live state through r: `ip -d -j link show`, `tc -j
// qdisc show`, then classes and filters only where macake may own some.
// Caps is left zero; the Backend fills it in.
func Observe(ctx context.Context, r execrun.Runner, t Tools) (Live, error) {
	live := Live{Tools: t, Devices: map[string]*DeviceState{}}
	out, err := runOutput(ctx, r, t.ipCmd("-d", "-j", "link", "show"))
	if err != nil {
		return live, err
	}
	devs, err := ParseLinks(out)
	if err != nil {
		return live, err
	}
	for _, d := range devs {
		live.Devices[d.Name] = &DeviceState{Device: d}
	}
	if out, err = runOutput(ctx, r, t.tcCmd("-j", "qdisc", "show")); err != nil {
		return live, err
	}
	qs, err := ParseQdiscs(out)
	if err != nil {
		return live, err
	}
	for _, q := range qs {
		if d := live.Devices[q.Dev]; d != nil {
			d.Qdiscs = append(d.Qdiscs, q)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(live.Devices)) {
		d := live.Devices[n]
		if root := d.Root(); root != nil && root.Handle == RootHandle && (root.Kind == "htb" || root.Kind == "prio") {
			if root.Kind == "htb" {
				if out, err = runOutput(ctx, r, t.tcCmd("-d", "-j", "class", "show", "dev", n)); err != nil {
					return live, err
				}
				if d.Classes, err = ParseClasses(out); err != nil {
					return live, fmt.Errorf("%s: %w", n, err)
				}
			}
			if _, isIFB := IFBSlot(n); !isIFB {
				if out, err = runOutput(ctx, r, t.tcCmd("-j", "filter", "show", "dev", n, "parent", rootHandleArg)); err != nil {
					return live, err
				}
				if d.RootFilters, err = ParseFilters(out); err != nil {
					return live, fmt.Errorf("%s: %w", n, err)
				}
			}
		}
		if d.Hook() != nil {
			if out, err = runOutput(ctx, r, t.tcCmd("-j", "filter", "show", "dev", n, "ingress")); err != nil {
				return live, err
			}
			if d.IngressFilters, err = ParseFilters(out); err != nil {
				return live, fmt.Errorf("%s: %w", n, err)
			}
		}
	}
	return live, nil
}

// runOutput runs a read-only command and returns its stdout; a non-zero
// exit is an error carrying the child's stderr.
func runOutput(ctx context.Context, r execrun.Runner, cmd execrun.Command) ([]byte, error) {
	res, err := r.Run(ctx, cmd)
	res, err = execrun.Check(cmd, res, err)
	if err != nil {
		return nil, fmt.Errorf("observing: %w", hint(err))
	}
	return res.Stdout, nil
}

// hint adds what to do to the kernel and iproute2 errors a user can fix.
func hint(err error) error {
	var ee *execrun.Error
	if !errors.As(err, &ee) {
		return err
	}
	msg := string(ee.Stderr)
	for _, h := range []struct{ needle, advice string }{
		{"Specified qdisc kind is unknown", "the kernel lacks this qdisc; `macake doctor` lists what it has"},
		{"Unknown device type", "the kernel has no IFB support: load it with `modprobe ifb` (CONFIG_IFB)"},
		{"Cannot find device", "the interface is gone or was renamed; the next plan adapts"},
		{"Exclusivity flag on", "a root qdisc is already there, macake's from an interrupted apply or another tool's; plan again"},
		{"executable file not found", "install iproute2, or point MACAKE_TC / MACAKE_IP at tc and ip"},
	} {
		if strings.Contains(msg, h.needle) || (ee.Err != nil && strings.Contains(ee.Err.Error(), h.needle)) {
			return fmt.Errorf("%w (%s)", err, h.advice)
		}
	}
	return err
}
