// SPDX-License-Identifier: Apache-2.0

package ifstat

import (
	"fmt"

	"golang.org/x/net/route"
	"golang.org/x/sys/unix"
)

// CompareSources reads iface's counters from the exact ifdata sysctl,
// then the rounded NET_RT_IFLIST2 dump, then the sysctl again, and checks
// that they agree (AgreeWithinRounding) and that golang.org/x/net/route
// reads the dump's interface names and indexes as ParseIfList2 does. It
// returns the readings for a report and every disagreement.
func CompareSources(iface string) (exact, rounded Counters, problems []string, err error) {
	r := NewReader()
	before, err := r.Read(iface)
	if err != nil {
		return Counters{}, Counters{}, nil, err
	}
	b, err := route.FetchRIB(unix.AF_UNSPEC, unix.NET_RT_IFLIST2, 0)
	if err != nil {
		return before, Counters{}, nil, fmt.Errorf("NET_RT_IFLIST2: %w", err)
	}
	after, err := r.Read(iface)
	if err != nil {
		return before, Counters{}, nil, err
	}
	recs, err := ParseIfList2(b)
	if err != nil {
		return after, Counters{}, nil, err
	}
	if rounded, err = find(recs, iface); err != nil {
		return after, Counters{}, nil, err
	}
	problems = AgreeWithinRounding(before, rounded, after)
	msgs, err := route.ParseRIB(route.RIBType(unix.NET_RT_IFLIST2), b)
	if err != nil {
		return after, rounded, append(problems, fmt.Sprintf("x/net/route cannot parse the dump: %v", err)), nil
	}
	theirs := map[int]string{}
	for _, m := range msgs {
		if im, ok := m.(*route.InterfaceMessage); ok {
			theirs[im.Index] = im.Name
		}
	}
	for _, rec := range recs {
		if name, ok := theirs[rec.Index]; !ok || name != rec.Name {
			problems = append(problems, fmt.Sprintf("interface %d: ParseIfList2 reads %q, x/net/route %q", rec.Index, rec.Name, name))
		}
	}
	return after, rounded, problems, nil
}
