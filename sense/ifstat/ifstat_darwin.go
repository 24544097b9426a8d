// SPDX-License-Identifier: Apache-2.0

package ifstat

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"golang.org/x/net/route"
	"golang.org/x/sys/unix"
)

// MIB numbers of net.link.generic (xnu bsd/net/if_mib.h); x/sys lacks them.
const (
	netlinkGeneric = 0
	ifmibIfdata    = 2
	ifdataGeneral  = 1
)

// NewReader returns the macOS counter source. It reads the per-interface
// net.link.generic.ifdata.<index>.general sysctl, the same unrounded
// 64-bit path as the ifalldata sysctl Apple's netstat -w uses. Only when
// that sysctl is refused does it fall back to the NET_RT_IFLIST2 dump,
// whose byte counters the kernel rounds to 1 KiB and truncates to 32 bits
// for programs not signed by Apple (xnu rtsock.c, rdar://106029568); the
// Sampler's 32-bit wrap rule then keeps the deltas right.
func NewReader() Reader { return &sysctlReader{} }

type sysctlReader struct {
	mu      sync.Mutex
	indexes map[string]int
}

func (r *sysctlReader) Read(iface string) (Counters, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.indexes == nil {
		r.indexes = map[string]int{}
	}
	for attempt := 0; attempt < 2; attempt++ {
		idx, ok := r.indexes[iface]
		if !ok {
			ifi, err := net.InterfaceByName(iface)
			if err != nil {
				return Counters{}, fmt.Errorf("reading counters of %s: %w", iface, ErrNoInterface)
			}
			idx = ifi.Index
			r.indexes[iface] = idx
		}
		b, err := sysctlRetry("net", unix.AF_LINK, netlinkGeneric, ifmibIfdata, idx, ifdataGeneral)
		if errors.Is(err, unix.ENOENT) {
			delete(r.indexes, iface) // the index went away: look the name up again
			continue
		}
		if err != nil {
			return r.iflist2(iface, err)
		}
		recs, err := ParseIfAllData(b)
		if err != nil {
			return Counters{}, err
		}
		if len(recs) != 1 || recs[0].Name != iface {
			delete(r.indexes, iface) // the index now names another interface
			continue
		}
		c := recs[0].Counters
		c.Index = idx
		return c, nil
	}
	return Counters{}, fmt.Errorf("reading counters of %s: %w", iface, ErrNoInterface)
}

// iflist2 is the rounded fallback.
func (r *sysctlReader) iflist2(iface string, cause error) (Counters, error) {
	b, err := route.FetchRIB(unix.AF_UNSPEC, unix.NET_RT_IFLIST2, 0)
	if err != nil {
		return Counters{}, fmt.Errorf("reading counters of %s: ifdata sysctl: %v; NET_RT_IFLIST2: %w", iface, cause, err)
	}
	recs, err := ParseIfList2(b)
	if err != nil {
		return Counters{}, fmt.Errorf("reading counters of %s: %w", iface, err)
	}
	return find(recs, iface)
}

// sysctlRetry is unix.SysctlRaw retried on ENOMEM, which it returns when
// the table grew between its size probe and its read.
func sysctlRetry(name string, args ...int) (b []byte, err error) {
	for range 3 {
		b, err = unix.SysctlRaw(name, args...)
		if !errors.Is(err, unix.ENOMEM) {
			return b, err
		}
	}
	return b, err
}
