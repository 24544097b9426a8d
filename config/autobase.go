// SPDX-License-Identifier: Apache-2.0

package config

// AutoBase is the base rate "auto" stands for: AutoRateFraction (95 %)
// of the measured capacity, within [MinRate, top] (MaxRate, or the
// backend's limit when lower).
func AutoBase(capacity, top Rate) Rate {
	return max(MinRate, min(top, capacity*95/100))
}

// FromCapacity is the base rate a draft takes from a measured capacity:
// AutoBase, rounded down to a rate a person reads at a glance (whole
// Mbit/s from 10 Mbit/s, 100 kbit/s steps from 1 Mbit/s, whole kbit/s
// below).
func FromCapacity(capacity Rate) Rate {
	r := AutoBase(capacity, MaxRate)
	switch {
	case r >= 10*Mbit:
		return r / Mbit * Mbit
	case r >= Mbit:
		return r / (100 * Kbit) * (100 * Kbit)
	}
	return max(MinRate, r/Kbit*Kbit)
}
