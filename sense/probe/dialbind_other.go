// SPDX-License-Identifier: Apache-2.0

//go:build !linux && !darwin

package probe

import (
	"fmt"
	"syscall"
)

// BindControl reports that sockets cannot be bound to an interface here.
func BindControl(ifname string) func(network, address string, c syscall.RawConn) error {
	return func(string, string, syscall.RawConn) error {
		return fmt.Errorf("binding sockets to interface %s is not supported on this OS", ifname)
	}
}
