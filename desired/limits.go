// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"fmt"

	"github.com/macake/macake/config"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// aboveLimit says, for a plan's warnings, when a measured capacity of link
// l's direction is above the highest rate the backend shapes, so that the
// rates derived from it (an "auto" rate, an "auto" max) are capped there:
// the cap is never silent. It is "" otherwise.
func aboveLimit(l config.Link, dir shape.Direction, p state.Profile, lim shape.Limits) string {
	capacity, peak, _ := p.Capacity(dir)
	if !l.Shaper.Rate(dir).Auto && !l.Autorate.Bounds(dir).Max.Auto {
		return ""
	}
	measured := max(capacity, peak)
	if measured <= lim.Rate() {
		return ""
	}
	return fmt.Sprintf("the measured %s capacity, %s, is above %s, the highest rate %s shapes, so the %s's \"auto\" rates are capped there",
		dir, shape.FormatRate(measured), shape.FormatRate(lim.Rate()), lim.Name(), dir)
}
