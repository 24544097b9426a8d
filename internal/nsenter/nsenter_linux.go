// SPDX-License-Identifier: Apache-2.0

package nsenter

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Open opens the namespace `ip netns add NAME` made, for DoFD; the caller
// closes the descriptor.
func Open(name string) (int, error) {
	var err error
	// iproute2 keeps its namespaces in /run/netns (/var/run/netns on
	// systems where /var/run is not a link to /run).
	for _, dir := range []string{"/run/netns", "/var/run/netns"} {
		var fd int
		if fd, err = unix.Open(filepath.Join(dir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			return fd, nil
		}
	}
	return -1, fmt.Errorf("opening network namespace %s: %w", name, err)
}

// Do runs fn inside the named namespace (see DoFD).
func Do(name string, fn func() error) error {
	fd, err := Open(name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return DoFD(fd, name, fn)
}

// DoFD runs fn on an OS thread switched into the namespace fd refers to
// (name is for errors). Sockets created inside fn belong to the namespace
// for their whole life, wherever they are used afterwards; goroutines
// started inside fn do not inherit it. Paths under /proc/sys/net follow
// the thread too, but /sys/class/net does not.
func DoFD(fd int, name string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("opening the current network namespace: %w", err)
	}
	defer unix.Close(orig)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering namespace %s: %w", name, err)
	}
	ferr := fn()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// The thread stays locked and dies with this goroutine rather
		// than run other goroutines in the wrong namespace.
		return errors.Join(ferr, fmt.Errorf("leaving namespace %s: %w", name, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Cubic is a net.Dialer or net.ListenConfig Control that sets
// TCP_CONGESTION to cubic on TCP sockets (root may use any congestion
// control the kernel has, whatever the namespace's default).
func Cubic(network, address string, c syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "cubic")
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("setting TCP_CONGESTION=cubic: %w", serr)
	}
	return nil
}
