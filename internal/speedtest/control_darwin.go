// SPDX-License-Identifier: Apache-2.0

package speedtest

import "syscall"

// preferCubic does nothing: macOS uses CUBIC already and has no
// per-socket choice.
func preferCubic(fd int) {}

// Congestion returns the congestion control of a TCP connection; macOS
// does not say, and uses CUBIC.
func Congestion(c syscall.Conn) string { return "" }
