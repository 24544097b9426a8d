// SPDX-License-Identifier: Apache-2.0

package ifstat

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// NewSysfsReader reads counters under root (normally /sys/class/net; tests
// point it at a copy). It keeps the four statistics files open and
// re-reads them with pread, so a sample costs four reads and no opens. A
// failed read (the device was removed) closes them; the next Read reopens
// by name and reports the new interface index.
func NewSysfsReader(root string) Reader {
	return &sysfsReader{root: root, open: map[string]*sysfsIface{}}
}

type sysfsReader struct {
	root string
	mu   sync.Mutex
	open map[string]*sysfsIface
}

type sysfsIface struct {
	index int
	files [4]*os.File // rx_bytes, tx_bytes, rx_packets, tx_packets
}

var sysfsStats = [4]string{"rx_bytes", "tx_bytes", "rx_packets", "tx_packets"}

func (r *sysfsReader) Read(iface string) (Counters, error) {
	// Any name the kernel has may be read: the default route's interface,
	// which measure and doctor read, need not be one a policy could name
	// (shape.CheckInterfaceName). Only a path out of root is refused.
	if iface == "" || strings.ContainsAny(iface, "/\x00") || iface == "." || iface == ".." {
		return Counters{}, fmt.Errorf("reading counters: invalid interface name %q: %w", iface, ErrNoInterface)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for attempt := 0; attempt < 2; attempt++ {
		f := r.open[iface]
		if f == nil {
			var err error
			if f, err = r.openIface(iface); err != nil {
				return Counters{}, err
			}
			r.open[iface] = f
		}
		var v [4]uint64
		var rerr error
		for i, file := range f.files {
			if v[i], rerr = readUint(file); rerr != nil {
				break
			}
		}
		if rerr == nil {
			return Counters{RxBytes: v[0], TxBytes: v[1], RxPackets: v[2], TxPackets: v[3], Index: f.index}, nil
		}
		f.close()
		delete(r.open, iface)
	}
	return Counters{}, fmt.Errorf("reading counters of %s: %w", iface, ErrNoInterface)
}

func (r *sysfsReader) openIface(iface string) (*sysfsIface, error) {
	dir := filepath.Join(r.root, iface)
	idx, err := os.ReadFile(filepath.Join(dir, "ifindex"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading counters of %s: %w", iface, ErrNoInterface)
	}
	if err != nil {
		return nil, fmt.Errorf("reading counters of %s: %w", iface, err)
	}
	f := &sysfsIface{}
	if f.index, err = strconv.Atoi(strings.TrimSpace(string(idx))); err != nil {
		return nil, fmt.Errorf("reading counters of %s: ifindex %q: %w", iface, idx, err)
	}
	for i, name := range sysfsStats {
		if f.files[i], err = os.Open(filepath.Join(dir, "statistics", name)); err != nil {
			f.close()
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("reading counters of %s: %w", iface, ErrNoInterface)
			}
			return nil, fmt.Errorf("reading counters of %s: %w", iface, err)
		}
	}
	return f, nil
}

func (f *sysfsIface) close() {
	for _, file := range f.files {
		if file != nil {
			file.Close()
		}
	}
}

func readUint(f *os.File) (uint64, error) {
	var buf [32]byte
	n, err := f.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(buf[:n])), 10, 64)
}
