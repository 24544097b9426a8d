// SPDX-License-Identifier: Apache-2.0

//go:build !linux && !darwin

package probe

// Elsewhere only raw sockets are attempted.
const (
	datagramRewritesID  = false
	datagramTimestamps  = false
	datagramSupported   = false
	preferRawTimestamps = false
)

const datagramHint = "unprivileged ICMP sockets are not supported on this OS"
