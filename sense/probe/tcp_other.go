// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package probe

import "errors"

// openTCP opens the TCP sender of one family. Only Linux lets a raw
// socket read TCP (BSD kernels, darwin's included, never pass TCP to raw
// sockets; reading the answers would take a BPF device bound to the
// interface), so elsewhere every TCP probe is a connect() timed to its
// completion, root or not; see tcp.go.
func openTCP(v6 bool, cfg Config, _ uint64) (sender, error) {
	if cfg.Socket == SocketRaw {
		return nil, errors.New("raw TCP probes need Linux; this system times connect() instead (drop the raw socket mode)")
	}
	return openConnect(v6, cfg), nil
}
