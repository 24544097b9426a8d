// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"sort"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/shape"
)

// tcShaperName names a link's shaper of one direction for status: the
// device that carries macake's root qdisc, "wan0" for upload and
// "ifb-macake0" for download.
func tcShaperName(l shape.Link, d shape.Direction) string {
	if d == shape.Download {
		return "qdisc 4d4b: on " + tc.IFBName(l.Slot)
	}
	return "qdisc 4d4b: on " + l.Interface
}

// tcLiveShapers lists macake's root qdiscs as they are live: upload on an
// interface, download on an IFB (attributed to the interface whose
// redirect feeds it), with the rate of the htb class or of cake and the
// bfifo's limit (0 for cake, which sizes its own queue).
func tcLiveShapers(ctx context.Context, b *tc.Backend) ([]LiveShaper, error) {
	live, err := b.Observe(ctx)
	if err != nil {
		return nil, err
	}
	feeds := map[string]string{} // IFB → the interface redirected to it
	for name, dev := range live.Devices {
		for _, f := range dev.IngressFilters {
			for _, a := range f.Actions {
				if _, ok := tc.IFBSlot(a.ToDev); ok && f.Pref == tc.RedirectPref {
					feeds[a.ToDev] = name
				}
			}
		}
	}
	var out []LiveShaper
	for name, dev := range live.Devices {
		root := dev.Root()
		if root == nil || root.Handle != tc.RootHandle {
			continue
		}
		s := LiveShaper{Name: "qdisc 4d4b: on " + name, Interface: name, Direction: shape.Upload.String()}
		if _, ifb := tc.IFBSlot(name); ifb && dev.Kind == "ifb" {
			s.Interface, s.Direction = feeds[name], shape.Download.String()
		}
		switch {
		case root.Kind == "cake" && root.Cake != nil:
			s.RateBits = int64(root.Cake.BandwidthBytes) * 8
		case root.Kind == "htb":
			if c := dev.Class(tc.ClassHandle); c != nil {
				s.RateBits = c.RateBits
			}
			if leaf := dev.Leaf(tc.ClassHandle); leaf != nil && leaf.Kind == "bfifo" {
				s.QueueBytes = leaf.Limit
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
