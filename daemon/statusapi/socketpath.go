// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"runtime"
)

// maxSocketPathFor is the longest path a Unix socket may be bound to on
// goos: sun_path is 104 bytes on macOS and 108 on Linux, with room for
// the terminating NUL. A longer path fails to bind (EINVAL), which used to
// leave `macake status` saying "not running" while watch shaped (issue 12).
func maxSocketPathFor(goos string) int {
	if goos == "linux" {
		return 107
	}
	return 103
}

// shortSocketDirFor is where a socket whose state directory is too deep
// goes instead: root's runtime directory, which only root may write, so
// that no other user can put a socket there first and answer in the
// daemon's place.
func shortSocketDirFor(goos string) string {
	if goos == "linux" {
		return "/run"
	}
	return "/var/run"
}

// SocketPath returns the status socket of the daemon whose state directory
// is stateDir: SocketName inside it, or, when that path is too long to
// bind, macake-HASH.sock in root's runtime directory, HASH naming the
// state directory, so that the daemon and every client agree on it.
func SocketPath(stateDir string) string { return socketPathFor(runtime.GOOS, stateDir) }

func socketPathFor(goos, stateDir string) string {
	p := filepath.Join(stateDir, SocketName)
	if len(p) <= maxSocketPathFor(goos) {
		return p
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = filepath.Clean(stateDir)
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(shortSocketDirFor(goos), "macake-"+hex.EncodeToString(sum[:8])+".sock")
}
