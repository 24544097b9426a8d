// SPDX-License-Identifier: Apache-2.0

//go:build !darwin && !linux

package statusapi

import (
	"errors"
	"net"
)

// peerUID cannot tell the peer here: macake runs on macOS and Linux.
func peerUID(net.Conn) (int, error) {
	return 0, errors.New("peer credentials are not available on this system")
}
