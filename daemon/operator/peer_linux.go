// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"errors"
	"net"
	"os/user"
	"slices"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peerOf reads SO_PEERCRED (the user and effective group the peer
// connected with) and SO_PEERGROUPS (its supplementary groups then, Linux
// 4.13 and later). On an older kernel the groups come from the group
// database instead: what the user belongs to now, not what the process
// held.
func peerOf(c net.Conn) (Peer, error) {
	return peerCred(c, func(fd int) (Peer, error) {
		u, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			return Peer{}, err
		}
		p := Peer{UID: int(u.Uid), GIDs: []int{int(u.Gid)}}
		groups, err := peerGroups(fd)
		if errors.Is(err, unix.ENOPROTOOPT) {
			groups, err = userGroups(p.UID)
		}
		if err != nil {
			return p, err
		}
		for _, g := range groups {
			if !slices.Contains(p.GIDs, g) {
				p.GIDs = append(p.GIDs, g)
			}
		}
		return p, nil
	})
}

// peerGroups reads SO_PEERGROUPS, which x/sys/unix has no helper for: an
// array of gid_t, grown when the kernel says it needs more room.
func peerGroups(fd int) ([]int, error) {
	buf := make([]uint32, 32)
	for {
		n := uint32(len(buf) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		if errno == unix.ERANGE && int(n/4) > len(buf) {
			buf = make([]uint32, n/4)
			continue
		}
		if errno != 0 {
			return nil, errno
		}
		out := make([]int, 0, n/4)
		for _, g := range buf[:n/4] {
			out = append(out, int(g))
		}
		return out, nil
	}
}

// userGroups are the groups of user uid in the group database.
func userGroups(uid int) ([]int, error) {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return nil, err
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, id := range ids {
		if g, err := strconv.Atoi(id); err == nil {
			out = append(out, g)
		}
	}
	return out, nil
}
