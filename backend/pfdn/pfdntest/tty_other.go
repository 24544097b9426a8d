// SPDX-License-Identifier: Apache-2.0

//go:build !linux && !darwin

package pfdntest

// isTerminal reports false where the emulator cannot tell.
func isTerminal(fd int) bool { return false }
