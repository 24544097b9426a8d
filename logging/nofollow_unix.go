// SPDX-License-Identifier: Apache-2.0

//go:build unix

package logging

import "syscall"

// noFollow keeps the log file from being a symbolic link: one planted in
// its place would have root append to a file of the planter's choosing.
const noFollow = syscall.O_NOFOLLOW
