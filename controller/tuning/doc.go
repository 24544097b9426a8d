// SPDX-License-Identifier: Apache-2.0

// Package tuning is what the autorate control law (package controller) can
// be tuned with: its Config, upstream's defaults (DefaultConfig, from
// config.Defaults), the checks a Config must pass (Validate), macake's
// deviations from upstream (Improvements, MacakeImprovements) and the one
// mapping from a policy file onto it (FromPolicy).
//
// It is apart from the law so that the law reads no policy: controller
// imports tuning and shape only, and only tuning knows the policy schema.
package tuning
