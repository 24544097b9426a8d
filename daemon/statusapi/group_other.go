// SPDX-License-Identifier: Apache-2.0

//go:build !darwin

package statusapi

// SocketReaders says who may ask the daemon over its socket, for the
// message that tells everyone else to use sudo.
const SocketReaders = "root"

// socketGroup keeps the socket in root's group elsewhere: Linux has no
// group every administrator shares (sudo, wheel and adm differ by
// distribution), so status needs sudo there.
func socketGroup() (int, bool) { return 0, false }
