// SPDX-License-Identifier: Apache-2.0

//go:build !linux && !darwin

package linkfacts

import (
	"context"
	"errors"
	"runtime"
)

// System is the detector; on this OS it only reports that detection is
// not supported (MACAKE_LINK_FACTS still works).
type System struct{}

// NewSystem fails: only macOS and Linux are supported.
func NewSystem(SystemOptions) (*System, error) {
	return nil, errors.New("link facts: detection is not supported on " + runtime.GOOS + "; set " + EnvFile)
}

// Facts fails.
func (*System) Facts(context.Context) (Facts, error) {
	return Facts{}, errors.New("link facts: not supported on " + runtime.GOOS)
}

// Close does nothing.
func (*System) Close() error { return nil }
