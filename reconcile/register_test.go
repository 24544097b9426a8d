// SPDX-License-Identifier: Apache-2.0

package reconcile_test

// The tests open backends by name (backend.Open), as the commands do;
// cmd/macake links them in for the binary, these blank imports for the
// tests.
import (
	_ "github.com/macake/macake/backend/pfdn"
	_ "github.com/macake/macake/backend/tc"
)
