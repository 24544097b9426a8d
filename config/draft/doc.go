// SPDX-License-Identifier: Apache-2.0

// Package draft writes a first policy file for a network, as `macake
// init` detects or measures it: the match keys found, the rates to start
// from, and every other key commented out with its default. What it
// writes parses back to the same policy (config.Parse).
package draft
