// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"math"
	"math/rand/v2"
	"time"
)

// StarlinkLike returns a synthetic capacity trace with the shape of a
// Starlink downlink (reference/benchmark.md §2.5): the capacity is
// re-planned every 15 s (the first change at 7 s, so a 15 s cut sees one),
// wobbles by about ±15 % within a slot, and dips to a quarter for 200 ms at
// most slot changes (a satellite handover). Steps are 100 ms. The same seed
// always gives the same trace; testdata/traces/wobble.csv is seed 1, 60 s.
func StarlinkLike(seed uint64, length time.Duration) Trace {
	const step = 100 * time.Millisecond
	rng := rand.New(rand.NewPCG(seed, 0x5a17))
	t := Trace{Name: "starlink-like", Length: length}
	slotEnd := 7 * time.Second
	down, up := slotRates(rng)
	dipUntil := time.Duration(0)
	for at := time.Duration(0); at < length; at += step {
		if at >= slotEnd {
			slotEnd += 15 * time.Second
			down, up = slotRates(rng)
			if rng.Float64() < 0.7 {
				dipUntil = at + 200*time.Millisecond
			}
		}
		wobble := 1 + 0.1*math.Sin(2*math.Pi*at.Seconds()/2.3) + 0.05*(2*rng.Float64()-1)
		if at < dipUntil {
			wobble = 0.25
		}
		t.Steps = append(t.Steps, Step{
			At:       at,
			Download: roundKbit(down * wobble),
			Upload:   roundKbit(up * wobble),
		})
	}
	return t
}

// slotRates draws one slot's mean capacities: 25-60 Mbit/s down, 6-12 up.
func slotRates(rng *rand.Rand) (down, up float64) {
	return 25e6 + 35e6*rng.Float64(), 6e6 + 6e6*rng.Float64()
}

func roundKbit(bits float64) int64 { return int64(math.Round(bits/1e5)) * 1e5 }
