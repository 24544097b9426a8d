// SPDX-License-Identifier: Apache-2.0

package config

import (
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/shape"
)

// checkLimits checks the rates and the queue a policy gives against the
// target backend's shaper (LoadOptions.Limits): what every backend takes
// is checked by the values' own grammar, what only one takes here, at the
// key's position. The zero Limits check nothing.
func (d *decoder) checkLimits(p *Policy, lim shape.Limits) {
	if lim == (shape.Limits{}) {
		return
	}
	maxRate := units.Rate(lim.Rate())
	for _, r := range []struct {
		key string
		v   units.Rate
	}{
		{"shaper.download", p.Shaper.Download.Rate},
		{"shaper.upload", p.Shaper.Upload.Rate},
		{"autorate.download.min", p.Autorate.Download.Min},
		{"autorate.download.max", p.Autorate.Download.Max.Rate},
		{"autorate.upload.min", p.Autorate.Upload.Min},
		{"autorate.upload.max", p.Autorate.Upload.Max.Rate},
	} {
		if d.given(r.key) && r.v > maxRate {
			d.bad(r.key, "%s is above %s, the highest rate %s shapes; use at most %q", r.v, maxRate.Human(), lim.Name(), maxRate.String())
		}
	}
	maxQueue := units.Size(lim.Queue())
	// Above every backend's limit, checkShaper has said so already.
	if q := p.Shaper.Queue; d.given("shaper.queue") && !q.Auto && q.Size > maxQueue && q.Size <= units.Size(shape.MaxQueueBytes) {
		d.bad("shaper.queue", "%s is above %s, the largest queue %s takes; use at most %s, or \"auto\"", q.Size, maxQueue, lim.Name(), maxQueue)
	}
}
