// SPDX-License-Identifier: Apache-2.0

// Command pfctl is the pfdntest emulator of macOS's /sbin/pfctl. It keeps
// the emulated Mac in the file named by PFDN_EMU_STATE, shared with the
// emulated dnctl; point MACAKE_PFCTL at it to run macake on Linux.
package main

import (
	"os"

	"github.com/macake/macake/backend/pfdn/pfdntest"
)

func main() {
	args := append([]string(nil), os.Args...)
	os.Exit(pfdntest.Main(args, os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
