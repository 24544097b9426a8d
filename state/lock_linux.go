// SPDX-License-Identifier: Apache-2.0

package state

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/macake/macake/internal/fileowner"
)

// flockHolders lists the processes holding a flock on f's file, from
// /proc/locks (lines like "1: FLOCK ADVISORY READ 4242 08:01:1234 0 EOF";
// waiters, marked "->", hold nothing), with the owner of each. ok is
// false when the list cannot be read.
func flockHolders(f *os.File) (holders []LockBlocker, ok bool) {
	info, err := f.Stat()
	if err != nil {
		return nil, false
	}
	st, isStat := info.Sys().(*syscall.Stat_t)
	if !isStat {
		return nil, false
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return nil, false
	}
	defer locks.Close()
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != want {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		b := LockBlocker{PID: pid, UID: -1}
		if pi, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			if uid, _, known := fileowner.Of(pi); known {
				b.UID = uid
			}
		}
		holders = append(holders, b)
	}
	return holders, sc.Err() == nil
}
