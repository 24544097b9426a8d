// SPDX-License-Identifier: Apache-2.0

package sim

import "math/rand/v2"

// Random streams. Every source of randomness has its own stream derived
// from the run's seed, so that two controllers run on the same seed see the
// same link, the same reflector jitter and the same probe losses, and so
// that adding a draw in one place never shifts the numbers of another.
//
// Determinism across machines: the simulator draws only from PCG (integer
// arithmetic) and transforms draws with +, −, ×, ÷ and sqrt, which IEEE 754
// rounds identically everywhere. It never uses math.Exp, Log, Pow or Erf,
// whose amd64 and arm64 implementations may differ in the last bit, and it
// wraps products that are added in float64() so that the compiler cannot
// fuse them into an FMA on arm64 (the Go spec allows fusion otherwise).
const (
	streamLink uint64 = iota + 1
	streamReflector
	streamProbeLoss
	streamBottleneckLoss
	streamFlows
	streamLinkModel
	streamRED
)

// NewStream returns the random stream for one purpose of a run.
func NewStream(seed, purpose uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15^purpose))
}

// Uniform returns a value uniformly distributed in [lo, hi).
func Uniform(r *rand.Rand, lo, hi float64) float64 {
	return lo + float64(r.Float64()*(hi-lo))
}
