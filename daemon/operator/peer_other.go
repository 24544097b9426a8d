// SPDX-License-Identifier: Apache-2.0

//go:build !darwin && !linux

package operator

import (
	"errors"
	"net"
)

// peerOf cannot tell the peer here: macake runs on macOS and Linux.
func peerOf(net.Conn) (Peer, error) {
	return Peer{}, errors.New("peer credentials are not available on this system")
}
