// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/macake/macake/internal/netns"
)

// The host-fairness lab: the office of the tutorial "Traffic shaping with
// CAKE on Debian", section "Fair between hosts", shaped by macake from a
// policy file. Two PCs share a gateway whose WAN port (wan0) macake
// shapes, at the tutorial's 4500 kbit/s up and 18 Mbit/s down; pc1 opens
// one TCP connection to the server, pc2 eight, both at once. Routed first
// (the LAN's addresses reach the server), then masqueraded (the server
// sees only the gateway's):
//
//	pc1 192.0.2.11 ─┐
//	                ├─ br0 192.0.2.1 [gw] wan0 198.51.100.1 ── srv 198.51.100.10
//	pc2 192.0.2.12 ─┘
//
// It needs a kernel with sch_cake (`make fairness-lab` runs it in a cakevm
// guest); elsewhere it skips and says so.
var (
	fairnessLength = flag.Duration("e2e.fairness-length", 8*time.Second, "measured length of each fairness-lab case (after its warm-up)")
	fairnessRun    = flag.Bool("e2e.fairness", false, "run the host-fairness lab (`make fairness-lab` sets it): a measurement of minutes that a loaded machine can fail, so never part of `go test ./...`")
	fairnessFresh  = flag.Bool("e2e.fairness-fresh", false, "run macake down before each fairness-lab case, so that CAKE starts afresh instead of being changed in place")
	fairnessWarmup = flag.Duration("e2e.fairness-warmup", 3*time.Second, "warm-up of each fairness-lab case before it measures: the flows' slow start, and CAKE learning the hosts")
)

const (
	officeLAN      = "192.0.2.1"
	officeWAN      = "198.51.100.1"
	officeServer   = "198.51.100.10"
	officePort     = 5201
	officeUpload   = 4_500_000  // the tutorial's upload rate
	officeDownload = 18_000_000 // and its download rate, through the IFB
	// The connections each PC opens.
	officeFlows1, officeFlows2 = 1, 8
)

// office is the lab's namespaces, its server, and the payload bytes each
// PC's flows moved so far (received by the server on upload, by the PC on
// download).
type office struct {
	lab      *netns.Lab
	pcs      [2]*netns.Namespace
	gw, srv  *netns.Namespace
	received [2]atomic.Int64
}

// newOffice builds the office, routed (no NAT yet), and starts the server.
func newOffice(t *testing.T) *office {
	t.Helper()
	lab := netns.New(t, "fair")
	lab.Require("tc", "iproute2")
	if clientShaper() != "cake" {
		t.Skip("skipping: this kernel has no sch_cake (or sch_prio), which the fairness lab is about; `make fairness-lab` runs it in a cakevm guest")
	}
	o := &office{lab: lab, gw: lab.Namespace("gw"), srv: lab.Namespace("srv")}
	o.gw.IP("link", "add", "br0", "type", "bridge")
	o.gw.DisableOffloads("br0")
	o.gw.AddAddr("br0", officeLAN+"/24")
	o.gw.IP("link", "set", "br0", "up")
	for i := range o.pcs {
		pc := lab.Namespace(fmt.Sprintf("pc%d", i+1))
		port := fmt.Sprintf("lan%d", i+1)
		lab.Link(pc, "eth0", o.gw, port)
		o.gw.IP("link", "set", port, "master", "br0")
		pc.AddAddr("eth0", fmt.Sprintf("192.0.2.1%d/24", i+1))
		pc.Route("default", "via", officeLAN)
		o.pcs[i] = pc
	}
	lab.Link(o.gw, ClientDev, o.srv, "eth0")
	o.gw.AddAddr(ClientDev, officeWAN+"/24")
	o.srv.AddAddr("eth0", officeServer+"/24")
	o.srv.Route("192.0.2.0/24", "via", officeWAN)
	o.gw.Forward()

	l, err := o.srv.Listen(netns.CubicListenConfig(), "tcp4", fmt.Sprintf("%s:%d", officeServer, officePort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	netns.AcceptEach(l, o.serve)
	return o
}

// The flows' protocol: a flow sends its direction (bulkUpload or
// bulkDownload) and its PC's index, then the data flows until it closes.
func (o *office) serve(c net.Conn) {
	defer c.Close()
	var hello [2]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil || hello[1] > 1 {
		return
	}
	buf := make([]byte, 64<<10)
	switch hello[0] {
	case bulkUpload:
		for {
			n, err := c.Read(buf)
			o.received[hello[1]].Add(int64(n))
			if err != nil {
				return
			}
		}
	case bulkDownload:
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}
}

// masquerade hides the LAN behind the gateway's WAN address (nftables, as
// a router does it) and takes the server's route to the LAN away, so
// nothing but the masquerading can carry the traffic.
func (o *office) masquerade(t *testing.T) {
	t.Helper()
	o.gw.Exec("nft", "add", "table", "ip", "nat")
	o.gw.Exec("nft", "add", "chain", "ip", "nat", "post", "{ type nat hook postrouting priority 100 ; }")
	o.gw.Exec("nft", "add", "rule", "ip", "nat", "post", "oifname", ClientDev, "masquerade")
	o.srv.IP("route", "del", "192.0.2.0/24")
}

// share is what the two PCs got in one case: goodput, bit/s, by PC.
type share [2]float64

// first is pc1's part of what both got.
func (s share) first() float64 { return s[0] / (s[0] + s[1]) }

// fair says whether each PC got within ±tolerance of an equal share of
// what the two got together.
func (s share) fair(tolerance float64) bool {
	half := (s[0] + s[1]) / 2
	return half > 0 && s[0] >= half*(1-tolerance) && s[0] <= half*(1+tolerance)
}

// load runs pc1's one flow and pc2's eight in one direction at once, and
// returns each PC's goodput over length after warmup.
func (o *office) load(ctx context.Context, dir byte, warmup, length time.Duration) (share, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
		errs  []error
	)
	for pc, flows := range [2]int{officeFlows1, officeFlows2} {
		for range flows {
			c, err := o.pcs[pc].Dial(ctx, netns.CubicDialer(), "tcp4", fmt.Sprintf("%s:%d", officeServer, officePort))
			if err == nil {
				_, err = c.Write([]byte{dir, byte(pc)})
			}
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return share{}, fmt.Errorf("pc%d: opening a flow: %w", pc+1, err)
			}
			conns = append(conns, c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := pump(ctx, c, dir, &o.received[pc]); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("pc%d: %w", pc+1, err))
					mu.Unlock()
				}
			}()
		}
	}
	sleep(ctx, warmup)
	var from [2]int64
	for i := range from {
		from[i] = o.received[i].Load()
	}
	t0 := time.Now()
	sleep(ctx, length)
	var got share
	secs := time.Since(t0).Seconds()
	for i := range got {
		got[i] = float64(o.received[i].Load()-from[i]) * 8 / secs
	}
	cancel()
	for _, c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // reset: the next case starts from empty queues
		}
		c.Close()
	}
	wg.Wait()
	if len(errs) > 0 {
		return got, errs[0]
	}
	return got, nil
}

// officePolicy is the gateway's policy: the tutorial's fixed rates on the
// WAN port, with cake holding the [cake] table's lines (none: CAKE's
// defaults).
func officePolicy(cake string) string {
	p := fmt.Sprintf(`description = "fairness lab: the office's WAN port"
[match]
interface = %q
[shaper]
mode = "fixed"
upload = "%dkbit"
download = "%dkbit"
`, ClientDev, officeUpload/1000, officeDownload/1000)
	if cake != "" {
		p += "[cake]\n" + cake
	}
	return p
}

// fairnessCase is one row of the lab: a policy, the direction loaded, and
// what must come of it.
type fairnessCase struct {
	name string
	// nat: the office masquerades (every case after the first NAT one).
	nat  bool
	cake string
	dir  byte
	// fair: each PC within ±FairTolerance of an equal share; else pc2,
	// with eight connections, takes more than UnfairAbove of the link.
	fair bool
	// tutorial is the tutorial's figure (kbit/s, pc1 / pc2), "" where it
	// has none.
	tutorial string
}

// FairTolerance is how far from an equal share a PC may be in a fair
// case (the issue's ±15 %); UnfairAbove is the least pc2 takes in an
// unfair one (per-flow fairness gives it 8/9).
const (
	FairTolerance = 0.15
	UnfairAbove   = 0.75
)

const (
	dualHosts = "egress_isolation = \"dual-srchost\"\ningress_isolation = \"dual-dsthost\"\n"
	dualNAT   = dualHosts + "nat = true\n"
)

var fairnessCases = []fairnessCase{
	{name: "upload, CAKE's default (triple-isolate)", dir: bulkUpload, tutorial: "471 / 3460"},
	{name: "download, CAKE's default (triple-isolate)", dir: bulkDownload, tutorial: "1830 / 13600"},
	{name: "upload, egress_isolation = dual-srchost", cake: dualHosts, dir: bulkUpload, fair: true, tutorial: "2100 / 2100"},
	{name: "download, ingress_isolation = dual-dsthost", cake: dualHosts, dir: bulkDownload, fair: true, tutorial: "8550 / 6450"},
	{name: "behind NAT: upload, dual-srchost without nat", nat: true, cake: dualHosts, dir: bulkUpload, tutorial: "(said unfair)"},
	{name: "behind NAT: download, dual-dsthost without nat", nat: true, cake: dualHosts, dir: bulkDownload},
	{name: "behind NAT: upload, dual-srchost, nat = true", nat: true, cake: dualNAT, dir: bulkUpload, fair: true, tutorial: "(said fair)"},
	{name: "behind NAT: download, dual-dsthost, nat = true", nat: true, cake: dualNAT, dir: bulkDownload, fair: true},
}

// TestFairnessLab shapes the office's WAN port with the real `macake
// apply` and a policy file per case, loads it from both PCs at once and
// checks the relations the tutorial shows, not timings: with CAKE's
// default isolation the PC with eight connections takes most of the link;
// with dual-srchost (upload) and dual-dsthost (download) each PC gets an
// equal share within ±15 %; behind NAT only with nat = true.
// -e2e.report appends the table, beside the tutorial's figures.
func TestFairnessLab(t *testing.T) {
	if !*fairnessRun {
		t.Skip("skipping: the host-fairness lab runs with -e2e.fairness (`make fairness-lab`, in a cakevm guest)")
	}
	o := newOffice(t)
	m := NewMacake(t, macake(t), o.gw, ClientDev, officeServer)
	var rows []string
	natOn := false
	for _, c := range fairnessCases {
		if c.nat && !natOn {
			o.lab.Require("nft", "nftables")
			o.masquerade(t)
			natOn = true
		}
		m.SetPolicy(t, "office", officePolicy(c.cake))
		if *fairnessFresh {
			m.MustRun(t, 0, "down")
		}
		m.MustRun(t, 0, "apply")
		got, err := o.load(t.Context(), c.dir, *fairnessWarmup, *fairnessLength)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		verdict := "neither"
		switch {
		case got.fair(FairTolerance):
			verdict = "fair"
		case 1-got.first() > UnfairAbove:
			verdict = "pc2 takes most"
		}
		if c.fair && verdict != "fair" {
			t.Errorf("%s: pc1 (1 connection) %.0f kbit/s, pc2 (8) %.0f kbit/s: pc1 has %.0f %% of the two, want %.0f ± %.1f %%",
				c.name, got[0]/1e3, got[1]/1e3, 100*got.first(), 50.0, 50*FairTolerance)
		}
		if !c.fair && verdict != "pc2 takes most" {
			t.Errorf("%s: pc1 (1 connection) %.0f kbit/s, pc2 (8) %.0f kbit/s: pc2 has %.0f %% of the two, want it to take more than %.0f %%",
				c.name, got[0]/1e3, got[1]/1e3, 100*(1-got.first()), 100*UnfairAbove)
		}
		tut := c.tutorial
		if tut == "" {
			tut = "—"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %.0f / %.0f | %.0f %% | %s |", c.name, tut, got[0]/1e3, got[1]/1e3, 100*got.first(), verdict))
		t.Log(rows[len(rows)-1])
	}
	if t.Failed() {
		t.Logf("the gateway's qdiscs:\n%s", o.gw.Exec("tc", "-s", "qdisc", "show"))
	}
	m.MustRun(t, 0, "down")
	table := fmt.Sprintf("%d s per case after a %v warm-up; goodput in kbit/s, pc1 (1 connection) / pc2 (8 connections); shaped by `macake apply` at %d kbit/s up, %d Mbit/s down\n\n"+
		"| case | tutorial | macake | pc1's part | |\n|---|---|---|---|---|\n%s\n",
		int(fairnessLength.Seconds()), *fairnessWarmup, officeUpload/1000, officeDownload/1000000, strings.Join(rows, "\n"))
	t.Logf("\n%s", table)
	if *reportFile != "" {
		f, err := os.OpenFile(*reportFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fmt.Fprintf(f, "#### The host-fairness lab\n\n%s\n", table)
	}
}
