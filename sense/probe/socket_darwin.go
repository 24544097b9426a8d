// SPDX-License-Identifier: Apache-2.0

package probe

// On darwin any user may open an ICMP datagram socket. The kernel does not
// rewrite the echo identifier and delivers every ICMP reply on the host to
// every such socket (they live on the raw-IP list), so replies must be
// matched on source, identifier, sequence and the payload's nonce. Such a
// socket may also send 20-byte timestamp requests.
const (
	datagramRewritesID  = false
	datagramTimestamps  = true
	datagramSupported   = true
	preferRawTimestamps = false
)

const datagramHint = "unprivileged ICMP sockets failed to open"
