// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/sense/measure"
)

// TestNetnsMeasureAndInitEachLinkThroughItself: a client with two uplinks, wa
// (20 Mbit/s down, 8 up) and wb (6 down, 2 up), each to its own router.
// Both routers hold the same server address, so only the interface the
// traffic leaves by decides which link is measured; the default route
// prefers wa. `measure --link` of wb's policy measures wb's capacity (its
// load bound to wb), not the default route's, and the latency its load
// adds there as every kind of probe sees it (ICMP, raw TCP SYNs to the
// server, UDP echoes: each bound to wb; unbound, they would cross the idle
// wa and see nothing added). init --interface wb --measure writes rates
// from wb's.
func TestNetnsMeasureAndInitEachLinkThroughItself(t *testing.T) {
	if netns.InChild() {
		t.Skip("parent half")
	}
	const server, echo, icmp = "10.83.0.1", "10.83.0.2", "10.83.0.3"
	uplinks := []struct {
		dev      string
		down, up int64
	}{{"wa", 20_000_000, 8_000_000}, {"wb", 6_000_000, 2_000_000}}
	up := netns.New(t, "mbind").Uplinks("wa", "wb")
	up.Multihome()
	client := up.Client
	for i, u := range uplinks {
		r := up.Routers[i]
		r.AddAddr("lo", server+"/32")
		r.AddAddr("lo", echo+"/32")
		r.AddAddr("lo", icmp+"/32")
		r.SlowUDPEcho(0, echo+":7")
		r.Bottleneck(netns.UplinkDev, u.down, netns.BufferBytes(u.down, 100*time.Millisecond))
		client.Bottleneck(u.dev, u.up, netns.BufferBytes(u.up, 100*time.Millisecond))
		ln, err := r.Listen(netns.CubicListenConfig(), "tcp", server+":8080")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: speedtest.Handler()}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	dir := filepath.Join(t.TempDir(), "links.d")
	for name, dev := range map[string]string{"a": "wa", "b": "wb"} {
		configtest.Write(t, dir, name, configtest.Policy{Interface: dev, Download: "100mbit", Upload: "10mbit"}.TOML())
	}

	for i, link := range []string{"a", "b"} {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		r := runCLIIn(t, ctx, client, "--config-dir", dir, "--state-dir", t.TempDir(), "measure", "--link", link, "--json", "--no-save",
			"--server", "http://"+server+":8080", "--reflector", icmp, "--reflector", "tcp:"+server+":8080", "--reflector", "udp:"+echo+":7",
			"--idle", "1s", "--duration", "4s")
		cancel()
		if r.Code != exitcode.OK {
			t.Fatalf("measure --link %s: exit %d\n%s\n%s", link, r.Code, r.Stdout, r.Stderr)
		}
		var rep measure.Report
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("measure --link %s --json: %v\n%s", link, err, r.Stdout)
		}
		u := uplinks[i]
		down, up := rep.Download.BitsPerSecond, rep.Upload.BitsPerSecond
		t.Logf("measure --link %s (%s): %.1f Mbit/s down, %.1f up; stderr:\n%s", link, u.dev, float64(down)/1e6, float64(up)/1e6, r.Stderr)
		// What TCP gets of an htb class: 75-100 % of its rate.
		if rep.Interface != u.dev || down < u.down*3/4 || down > u.down || up < u.up*3/4 || up > u.up {
			t.Errorf("measure --link %s: interface %s, %d bit/s down, %d up; want %s's %d and %d",
				link, rep.Interface, down, up, u.dev, u.down, u.up)
		}
		// Each bottleneck holds 100 ms of its rate; every kind of probe
		// must see a good part of it under the download.
		kinds := map[string]bool{}
		for _, tr := range rep.Targets {
			kinds[tr.Probe] = true
			if tr.Idle.P50 == nil || tr.Download.P50 == nil {
				t.Errorf("measure --link %s: %s (%s) has no idle or download latency", link, tr.Address, tr.Probe)
				continue
			}
			added := time.Duration(*tr.Download.P50-*tr.Idle.P50) * time.Microsecond
			t.Logf("measure --link %s: %s (%s) saw the download add %v", link, tr.Address, tr.Probe, added)
			if added < 50*time.Millisecond {
				t.Errorf("measure --link %s: %s (%s) saw %s's download add %v, want most of its 100 ms queue", link, tr.Address, tr.Probe, u.dev, added)
			}
		}
		if !kinds["icmp"] || !kinds["tcp"] || !kinds["udp"] {
			t.Errorf("measure --link %s probed %v, want icmp, tcp and udp", link, kinds)
		}
	}

	// init --interface wb --measure writes 95 % of wb's capacity, not of
	// the default route's.
	fresh := filepath.Join(t.TempDir(), "links.d")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	r := runCLIIn(t, ctx, client, "--config-dir", fresh, "--state-dir", t.TempDir(), "init", "spare", "--interface", "wb", "--measure",
		"--server", "http://"+server+":8080", "--reflector", server, "--idle", "1s", "--duration", "4s")
	if r.Code != exitcode.OK {
		t.Fatalf("init --interface wb --measure: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	link, _, err := config.LoadFile(filepath.Join(fresh, "spare.toml"), config.LoadOptions{SkipOwnershipCheck: true})
	if err != nil {
		t.Fatalf("the written policy does not load: %v", err)
	}
	u := uplinks[1]
	if down, up := link.Shaper.Download.Rate, link.Shaper.Upload.Rate; link.Match.Interface != "wb" ||
		int64(down) < u.down*3/4*95/100 || int64(down) > u.down || int64(up) < u.up*3/4*95/100 || int64(up) > u.up {
		t.Errorf("init --interface wb --measure wrote %s: %s down, %s up; want 95 %% of about %d and %d bit/s", link.Match.Interface, down, up, u.down, u.up)
	}
}
