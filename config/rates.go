// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"math/big"

	"github.com/macake/macake/config/units"
	"github.com/macake/macake/shape"
)

// ErrNeedsMeasurement is returned by Link.Rates when a rate is "auto" and
// no capacity has been measured yet (run `macake measure`).
var ErrNeedsMeasurement = errors.New(`rate is "auto" but the link's capacity has not been measured yet; run "macake measure"`)

// Rates resolves one direction's controller floor, base (start) rate and
// ceiling. capacity is that direction's latest measured capacity and peak
// the highest measured (state.Profile.Peaks), each 0 when unknown; a peak
// below capacity counts as capacity. limit is the highest rate the
// backend's shaper takes (shape.Limits.Rate); 0 means MaxRate. Measured
// and derived rates are capped there (the caller says so when a
// measurement is above it); the policy's own rates were checked against it
// when it was loaded.
//
//   - base: [shaper] download/upload; "auto" is AutoRateFraction of the
//     latest capacity (the network as it is now).
//   - max: [autorate] max; "auto" is the highest capacity measured (one
//     poor measurement must not cap the controller);
//     not given, it keeps upstream's default proportion to the base
//     (download 80/20, upload 35/20 of base), capped at limit. An "auto"
//     max without a measurement falls back to that proportion too.
//   - min: [autorate] min; not given, upstream's proportion (5/20 of base),
//     at least MinRate.
//
// With all of it left out this gives exactly cake-autorate's defaults:
// 5/20/80 Mbit/s download and 5/20/35 Mbit/s upload. Measured values can
// disagree with explicit bounds, so the result is made consistent: max is
// raised to min if below it, and base is clamped into [min, max]. A
// direction no controller steers (fixed or off, Shaper.Steers) has min,
// base and max all at the configured rate.
func (l Link) Rates(d shape.Direction, capacity, peak, limit units.Rate) (lo, base, hi units.Rate, err error) {
	top := units.MaxRate
	if limit > 0 {
		top = min(top, limit)
	}
	setting, bounds := l.Shaper.Rate(d), l.Autorate.Bounds(d)
	defBounds, defBase := Defaults.Autorate.Bounds(d), Defaults.Shaper.Rate(d).Rate
	switch {
	case setting.Auto && capacity <= 0:
		return 0, 0, 0, ErrNeedsMeasurement
	case setting.Auto:
		base = AutoBase(capacity, top)
	case setting.Rate > 0:
		base = setting.Rate
	default:
		base = defBase
	}
	if !l.Shaper.Steers(d) {
		return base, base, base, nil
	}
	switch {
	case bounds.Max.Auto && capacity > 0:
		hi = min(top, max(capacity, peak))
	case bounds.Max.Rate > 0:
		hi = bounds.Max.Rate
	default:
		hi = max(base, scale(base, defBounds.Max.Rate, defBase, top))
	}
	if bounds.Min > 0 {
		lo = bounds.Min
	} else {
		lo = min(base, scale(base, defBounds.Min, defBase, top))
	}
	hi = max(hi, lo)
	base = max(lo, min(hi, base))
	return lo, base, hi, nil
}

// scale returns r×num/den within [MinRate, top], exactly.
func scale(r, num, den, top units.Rate) units.Rate {
	v := new(big.Int).Mul(big.NewInt(int64(r)), big.NewInt(int64(num)))
	v.Quo(v, big.NewInt(int64(den)))
	if !v.IsInt64() || v.Int64() > int64(top) {
		return top
	}
	return max(units.MinRate, units.Rate(v.Int64()))
}
