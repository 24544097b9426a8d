// SPDX-License-Identifier: Apache-2.0

// Package operator decides who may change a running `macake watch` over
// its status socket, from the credentials the kernel gives for the peer
// of a unix socket connection (SO_PEERCRED and SO_PEERGROUPS on Linux,
// LOCAL_PEERCRED on macOS): never from anything the client says about
// itself.
//
// Two levels: root (and the daemon's own user) may do anything the socket
// offers, such as handing in a measurement; the operator group of the
// daemon settings (operator_group: admin on macOS, none on Linux) may
// also pause and resume the shaping, and nothing else. Everyone who may
// connect may read the status.
package operator

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"slices"
	"strconv"
)

// Peer is who is at the other end of a unix socket connection: the
// credentials it connected with.
type Peer struct {
	// UID is its effective user id.
	UID int
	// GIDs are its groups: the effective group first, then the
	// supplementary ones.
	GIDs []int
}

// In reports whether the peer belongs to group gid.
func (p Peer) In(gid int) bool { return slices.Contains(p.GIDs, gid) }

// Who names the peer for a message or a log line: "uid 501 (alice)".
func (p Peer) Who() string {
	s := "uid " + strconv.Itoa(p.UID)
	if u, err := user.LookupId(strconv.Itoa(p.UID)); err == nil {
		s += " (" + u.Username + ")"
	}
	return s
}

// Name is the peer's user name, or its uid when it has none.
func (p Peer) Name() string {
	if u, err := user.LookupId(strconv.Itoa(p.UID)); err == nil {
		return u.Username
	}
	return "uid " + strconv.Itoa(p.UID)
}

// PeerOf returns the credentials of the process at the other end of a
// unix socket connection.
func PeerOf(c net.Conn) (Peer, error) { return peerOf(c) }

// Policy says who may operate the daemon.
type Policy struct {
	// Group names the operator group; "" when there is none.
	Group string
	// GID is its id (valid when Group is set).
	GID int
	// DaemonUID is the daemon's own user, which may do what root may.
	DaemonUID int
}

// NoGroup is the daemon settings' operator_group value that names no
// group: only root may pause.
const NoGroup = "none"

// NewPolicy is the policy of the daemon settings' operator group (group
// "" or NoGroup: none). A group that does not exist on this machine
// gives the policy without it and an error that says so, for the log:
// the daemon runs on, with root alone allowed.
func NewPolicy(group string) (Policy, error) {
	p := Policy{DaemonUID: os.Geteuid()}
	if group == "" || group == NoGroup {
		return p, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return p, fmt.Errorf("operator_group %q: no such group on this machine (%v); only root may pause the shaping until it exists and watch restarts", group, err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return p, fmt.Errorf("operator_group %q: group id %q is not a number", group, g.Gid)
	}
	p.Group, p.GID = group, gid
	return p, nil
}

// Level is what a request needs.
type Level int

// The levels.
const (
	// Root: root or the daemon's own user.
	Root Level = iota
	// Operate: also the operator group.
	Operate
)

// ErrRefused marks a peer that may not do what it asked.
var ErrRefused = errors.New("refused")

// refusal is an error matching ErrRefused whose text is only its
// message, for the client to print as it is.
type refusal struct{ msg string }

func (r *refusal) Error() string        { return r.msg }
func (r *refusal) Is(target error) bool { return target == ErrRefused }

func refused(format string, args ...any) error { return &refusal{fmt.Sprintf(format, args...)} }

// Check returns nil when the peer of c may do what at level needs, else
// an error matching ErrRefused that says who may and what to run (what:
// "pause", "measurement"; how: the command to run, e.g. "macake pause").
// It also returns the peer, for the log.
func (p Policy) Check(c net.Conn, level Level, what, how string) (Peer, error) {
	peer, err := PeerOf(c)
	if err != nil {
		return peer, refused("cannot tell who sent the %s (%v); refused", what, err)
	}
	return peer, p.Allows(peer, level, what, how)
}

// Allows is Check for a known peer.
func (p Policy) Allows(peer Peer, level Level, what, how string) error {
	if peer.UID == 0 || peer.UID == p.DaemonUID {
		return nil
	}
	if level == Operate && p.Group != "" && peer.In(p.GID) {
		return nil
	}
	switch {
	case level == Operate && p.Group != "":
		return refused("only root and members of group %s may send macake watch a %s (%s asked); run %s with sudo, or join group %s",
			p.Group, what, peer.Who(), how, p.Group)
	case level == Operate:
		return refused("only root may send macake watch a %s (%s asked; the daemon settings name no operator_group); run %s with sudo",
			what, peer.Who(), how)
	}
	return refused("only root may send macake watch a %s (%s asked); run %s with sudo", what, peer.Who(), how)
}
