// SPDX-License-Identifier: Apache-2.0

//go:build !linux && !darwin

package speedtest

import "syscall"

func loadSocketControl(network, address string, c syscall.RawConn) error { return nil }

// Congestion returns "" on this OS.
func Congestion(c syscall.Conn) string { return "" }
