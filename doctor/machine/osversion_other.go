// SPDX-License-Identifier: Apache-2.0

//go:build !darwin && !linux

package machine

import "runtime"

// OSVersion names the system; macake does not run here.
func OSVersion() string { return runtime.GOOS }
