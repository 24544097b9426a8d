// SPDX-License-Identifier: Apache-2.0

//go:build !linux && !darwin

package ifstat

import (
	"errors"
	"runtime"
)

// NewReader returns a Reader that fails: only macOS and Linux are supported.
func NewReader() Reader { return unsupported{} }

type unsupported struct{}

func (unsupported) Read(string) (Counters, error) {
	return Counters{}, errors.New("interface counters are not supported on " + runtime.GOOS)
}
