// SPDX-License-Identifier: Apache-2.0

// Package archtest holds the tests that keep the layout honest: the pure
// cores (config, controller, desired, plan, shape) start no process, open
// no socket and read no wall clock, so that the same inputs always give
// the same output and tests need no machine; no package imports one its
// folder's rule forbids (imports_test.go: nothing reaches up the data
// flow); and the binary links none of the packages that would only weigh
// on every run (deps_test.go).
// It has no code of its own.
package archtest
