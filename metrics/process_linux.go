// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// processStats reads /proc/self: the open descriptors, the resident and
// virtual sizes (statm) and the start time (stat's starttime after the
// boot time in /proc/stat).
func processStats() procStats {
	p := procStats{openFDs: countFDs("/proc/self/fd")}
	page := uint64(os.Getpagesize())
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 2 {
			size, _ := strconv.ParseUint(f[0], 10, 64)
			res, _ := strconv.ParseUint(f[1], 10, 64)
			p.vsize, p.rss = size*page, res*page
		}
	}
	stat, err1 := os.ReadFile("/proc/self/stat")
	boot, err2 := os.ReadFile("/proc/stat")
	if err1 != nil || err2 != nil {
		return p
	}
	// The command name may hold spaces; starttime is the 20th field
	// after it, in clock ticks (USER_HZ, 100 on Linux).
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 20 {
		return p
	}
	ticks, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return p
	}
	for _, line := range strings.Split(string(boot), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if btime, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				p.start = time.Unix(btime, 0).Add(time.Duration(ticks) * time.Second / 100)
			}
		}
	}
	return p
}
