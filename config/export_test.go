// SPDX-License-Identifier: Apache-2.0

package config

// The schema walkers, for the external tests that check the docs of both
// files' schemas (the settings' live in config/settings, which imports
// config).
var (
	TOMLFields = tomlFields
	IsLeaf     = isLeaf
)
