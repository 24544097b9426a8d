// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/macake/macake/config/configtest"
)

func TestReflectorPoolKeepsWhatWasProbedThenThePolicysFirst(t *testing.T) {
	pool := configtest.Addrs("1.1.1.1", "8.8.8.8", "9.9.9.9", "1.0.0.1")
	tests := []struct {
		name    string
		pingers int
		keep    []netip.Addr
		want    []netip.Addr
	}{
		{"a fresh start probes the policy's first", 2, nil, configtest.Addrs("1.1.1.1", "8.8.8.8", "9.9.9.9", "1.0.0.1")},
		{"a replacement keeps the probed set", 2, configtest.Addrs("9.9.9.9", "1.0.0.1"), configtest.Addrs("9.9.9.9", "1.0.0.1", "1.1.1.1", "8.8.8.8")},
		{"a kept address the pool lost is topped up", 2, configtest.Addrs("4.4.4.4", "9.9.9.9"), configtest.Addrs("9.9.9.9", "1.1.1.1", "8.8.8.8", "1.0.0.1")},
		{"an IPv4-mapped address is the same reflector", 1, configtest.Addrs("::ffff:8.8.8.8"), configtest.Addrs("8.8.8.8", "1.1.1.1", "9.9.9.9", "1.0.0.1")},
		{"more pingers than the pool", 9, nil, configtest.Addrs("1.1.1.1", "8.8.8.8", "9.9.9.9", "1.0.0.1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReflectorPool(pool, tt.pingers, tt.keep, nil); !slices.Equal(got, tt.want) {
				t.Errorf("ReflectorPool = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReflectorPoolShufflesOnlyTheSpares(t *testing.T) {
	pool := configtest.Addrs("1.1.1.1", "8.8.8.8", "9.9.9.9", "1.0.0.1", "149.112.112.112", "208.67.222.222")
	seen := map[netip.Addr]bool{}
	for seed := range uint64(20) {
		got := ReflectorPool(pool, 2, nil, rand.New(rand.NewPCG(seed, 1)))
		if !slices.Equal(got[:2], pool[:2]) {
			t.Fatalf("seed %d: the probed set moved: %v", seed, got)
		}
		if len(got) != len(pool) {
			t.Fatalf("seed %d: %d addresses, want %d", seed, len(got), len(pool))
		}
		seen[got[2]] = true
	}
	if len(seen) < 2 {
		t.Errorf("the first spare was %v on every seed: the spares are not shuffled", seen)
	}
}
