// SPDX-License-Identifier: Apache-2.0

// Package realmac is macake's end-to-end suite for a Mac: the real macake
// binary applies, re-plans, changes and takes down policies on lo0,
// converges through policy sets in a random order, repairs drift, survives
// injected tool failures, leaves other tools' pipes and anchors alone, and
// after down leaves pf and dummynet exactly as they were.
//
// By default (`go test ./e2e/realmac`, on Linux in `make test`) it runs
// against the pfdntest emulator's pfctl and dnctl binaries, so the suite
// itself is exercised on every change. With the build tag, `sudo go test
// -tags realmac ./e2e/realmac` on a Mac, the very same tests run against
// /sbin/pfctl and /usr/sbin/dnctl. Everything stays clear of what a real
// macake on that Mac owns: the anchor com.apple/macake-realmac, pipes
// 65100–65199, links on lo0 only, and a state directory of its own. The
// main ruleset is read, never written; pf is never disabled. The one test
// with traffic sends it on lo0, to this process.
package realmac
