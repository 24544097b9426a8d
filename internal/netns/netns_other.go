// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package netns

import "testing"

// ChildEnv is set in the environment of a re-executed test binary.
const ChildEnv = "MACAKE_NETNS_CHILD"

// InChild reports whether this process was re-executed inside a namespace;
// never on this OS.
func InChild() bool { return false }

// Lab owns the namespaces of one test. Network namespaces exist only on
// Linux; elsewhere New skips the test.
type Lab struct{}

// New skips the test: network namespaces need Linux.
func New(tb testing.TB, prefix string) *Lab {
	tb.Helper()
	tb.Skip("skipping: network-namespace tests need Linux")
	return nil
}
