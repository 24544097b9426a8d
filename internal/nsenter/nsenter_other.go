// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package nsenter

import (
	"errors"
	"syscall"
)

// ErrNotLinux is what Do answers off Linux: network namespaces are Linux's.
var ErrNotLinux = errors.New("network namespaces need Linux")

// Do fails: network namespaces need Linux.
func Do(name string, fn func() error) error { return ErrNotLinux }

// Cubic does nothing: the congestion control is chosen per socket only on
// Linux (macOS's default is CUBIC already).
func Cubic(network, address string, c syscall.RawConn) error { return nil }
