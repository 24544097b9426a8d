// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/shape"
)

// BenchmarkSetRateKernel measures the controller's actuation on a real
// kernel: from calling tc.Backend.SetRate (the controller's decision) to
// the kernel holding the new rate, which is one tc child process. After
// every call it reads the class back with `tc -j class show` and fails if
// the kernel does not show the new rate yet: SetRate returns only after
// the kernel acknowledged it. It reports the p50 and p99 of the call.
//
//	sudo go test ./e2e -run '^$' -bench SetRateKernel -benchtime 200x
func BenchmarkSetRateKernel(b *testing.B) {
	lab := netns.New(b, "e2ea")
	lab.Require("tc", "iproute2")
	cli, peer := lab.Namespace("cli"), lab.Namespace("peer")
	lab.Link(cli, ClientDev, peer, "lan0")
	backend := tc.New(execrun.Exec{Timeout: 10 * time.Second})
	backend.Tools.Netns = cli.Name()
	link := shape.Link{Name: "wan", Interface: ClientDev, Slot: 0,
		Upload:     shape.Pipe{RateBits: 10_000_000, QueueBytes: 64 << 10},
		Download:   shape.Pipe{RateBits: 50_000_000, QueueBytes: 64 << 10},
		Reflectors: []shape.Reflector{shape.ICMPReflector(netip.MustParseAddr(Reflectors[0]))}}
	ctx := context.Background()
	p, err := backend.Plan(ctx, shape.State{Links: []shape.Link{link}})
	if err != nil {
		b.Fatal(err)
	}
	for _, op := range p.Ops {
		if err := backend.Execute(ctx, op); err != nil {
			b.Fatal(err)
		}
	}
	ifb := tc.IFBName(0)
	read := execrun.Command{Argv: []string{backend.Tools.TC, "-n", cli.Name(), "-d", "-j", "class", "show", "dev", ifb}}
	var calls []time.Duration
	rate := int64(50_000_000)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		rate = 20_000_000 + int64(i%100)*300_000 // whole kbit/s, a new value each time
		start := time.Now()
		if err := backend.SetRate(ctx, link, shape.Download, shape.Pipe{RateBits: rate, QueueBytes: rate / 800}); err != nil {
			b.Fatal(err)
		}
		calls = append(calls, time.Since(start))
		b.StopTimer()
		res, err := execrun.Exec{}.Run(ctx, read)
		if _, err = execrun.Check(read, res, err); err != nil {
			b.Fatal(err)
		}
		if got := classRate(b, res.Stdout); got != rate {
			b.Fatalf("after SetRate(%d bit/s) returned, the kernel shows %d bit/s", rate, got)
		}
		b.StartTimer()
	}
	slices.Sort(calls)
	pct := func(p int) float64 { return float64(calls[(len(calls)-1)*p/100].Microseconds()) / 1000 }
	b.ReportMetric(pct(50), "p50-ms")
	b.ReportMetric(pct(99), "p99-ms")
}

// classRate returns the rate in bit/s of the htb class in `tc -d -j class
// show` output, read as the tc backend reads it (iproute2 up to 6.1
// prints htb classes as text even with -j, in whole kbit/s at best).
func classRate(b *testing.B, out []byte) int64 {
	b.Helper()
	classes, err := tc.ParseClasses(out)
	if err != nil {
		b.Fatalf("tc class show: %v\n%s", err, out)
	}
	for _, c := range classes {
		if c.Kind == "htb" {
			return c.RateBits
		}
	}
	b.Fatalf("no htb class in %s", out)
	return 0
}
