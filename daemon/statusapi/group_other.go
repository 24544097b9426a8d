// SPDX-License-Identifier: Apache-2.0

//go:build !darwin

package statusapi

// defaultSocketGroup keeps the socket in root's group elsewhere when the
// daemon settings name no operator group: Linux has no group every
// administrator shares (sudo, wheel and adm differ by distribution), so
// status needs sudo there.
func defaultSocketGroup() (int, bool) { return 0, false }
