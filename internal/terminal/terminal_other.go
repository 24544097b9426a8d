// SPDX-License-Identifier: Apache-2.0

//go:build !darwin && !linux

package terminal

// isTerminalFD reports false where macake cannot tell: no colour.
func isTerminalFD(uintptr) bool { return false }
