// SPDX-License-Identifier: Apache-2.0

package config

import "github.com/macake/macake/config/units"

// AutoBase is the base rate "auto" stands for: AutoRateFraction (95 %)
// of the measured capacity, within [MinRate, top] (MaxRate, or the
// backend's limit when lower).
func AutoBase(capacity, top units.Rate) units.Rate {
	return max(units.MinRate, min(top, capacity*95/100))
}

// FromCapacity is the base rate a draft takes from a measured capacity:
// AutoBase, rounded down to a rate a person reads at a glance (whole
// Mbit/s from 10 Mbit/s, 100 kbit/s steps from 1 Mbit/s, whole kbit/s
// below).
func FromCapacity(capacity units.Rate) units.Rate {
	r := AutoBase(capacity, units.MaxRate)
	switch {
	case r >= 10*units.Mbit:
		return r / units.Mbit * units.Mbit
	case r >= units.Mbit:
		return r / (100 * units.Kbit) * (100 * units.Kbit)
	}
	return max(units.MinRate, r/units.Kbit*units.Kbit)
}
