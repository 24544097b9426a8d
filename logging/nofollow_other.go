// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package logging

// noFollow is not available here: the daemon runs on macOS and Linux.
const noFollow = 0
