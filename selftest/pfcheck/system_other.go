// SPDX-License-Identifier: Apache-2.0

//go:build !darwin

package pfcheck

import (
	"context"

	"github.com/macake/macake/selftest/check"
)

// Elsewhere the system checks are skipped before their probes run.

func probeRoutes(context.Context) check.Result   { return check.Result{Status: check.Skipped} }
func probeCounters(context.Context) check.Result { return check.Result{Status: check.Skipped} }
