// SPDX-License-Identifier: Apache-2.0

package sim_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/macake/macake/sim"
	"github.com/macake/macake/sim/autorate"
	"github.com/macake/macake/sim/linkmodel"
)

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRun60s8Flows is the quality bar of benchmark.md §6.1: 60
// simulated seconds with 8 flows (here 8 per direction) on the built-in
// Starlink and LTE models. It reports simulated seconds per CPU second.
func BenchmarkRun60s8Flows(b *testing.B) {
	for _, model := range []string{"starlink", "lte"} {
		for _, ctl := range []string{"none", "fixed", "oracle-lag0.5", "upstream", "ours"} {
			b.Run(model+"/"+ctl, func(b *testing.B) {
				l, err := linkmodel.New(model, 1)
				if err != nil {
					b.Fatal(err)
				}
				f, err := sim.Baseline(ctl)
				if err != nil {
					f = autorate.Arms()[ctl]
				}
				opt := sim.Options{Duration: 60 * time.Second, Flows: [2]int{8, 8}, Seed: 1}
				b.ReportAllocs()
				start := cpuTime(b)
				for b.Loop() {
					if _, err := sim.Run(l, opt, f); err != nil {
						b.Fatal(err)
					}
				}
				cpu := cpuTime(b) - start
				b.ReportMetric(float64(b.N)*opt.Duration.Seconds()/cpu.Seconds(), "sim-s/cpu-s")
				b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/run")
			})
		}
	}
}
