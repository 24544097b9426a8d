// SPDX-License-Identifier: Apache-2.0

package ifstat

// NewReader returns the Linux counter source, /sys/class/net/IF/statistics
// (of the network namespace that mounted /sys).
func NewReader() Reader { return NewSysfsReader("/sys/class/net") }
