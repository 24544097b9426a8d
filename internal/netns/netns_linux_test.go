// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestChildSeesNamespaceSysfs is the in-namespace half of TestLab: run by
// RunTest, it checks that sysfs shows the namespace's own devices.
func TestChildSeesNamespaceSysfs(t *testing.T) {
	if !InChild() {
		t.Skip("runs only inside a namespace, started by TestLab")
	}
	if _, err := os.Stat("/sys/class/net/vc/statistics/rx_bytes"); err != nil {
		t.Fatalf("sysfs of the namespace: %v", err)
	}
}

func TestLab(t *testing.T) {
	if InChild() {
		t.Skip("parent half")
	}
	lab := New(t, "lab")
	client := lab.Namespace("client")
	server := lab.Namespace("server")
	lab.Link(client, "vc", server, "vs")
	client.AddAddr("vc", "10.77.0.2/24")
	server.AddAddr("vs", "10.77.0.1/24")
	client.AddAddr("vc", "fd77::2/64")
	server.AddAddr("vs", "fd77::1/64")
	client.Route("default", "via", "10.77.0.1")

	if v, err := client.ReadSysctl("net.ipv4.ping_group_range"); err != nil || v != "0\t2147483647" {
		t.Errorf("ping_group_range = %q, %v; want unprivileged ICMP allowed", v, err)
	}
	if v, _ := server.ReadSysctl("net.ipv4.ip_forward"); v != "0" {
		t.Errorf("ip_forward = %q before Forward", v)
	}
	if out := client.Exec("ip", "route", "show", "default"); !strings.Contains(out, "via 10.77.0.1 dev vc") {
		t.Errorf("default route: %q", out)
	}
	if out := client.Exec("ethtool", "-k", "vc"); !strings.Contains(out, "tcp-segmentation-offload: off") || !strings.Contains(out, "generic-receive-offload: off") {
		t.Errorf("offloads still on:\n%s", out)
	}
	if mac := server.HardwareAddr("vs"); len(mac) != 6 {
		t.Errorf("server MAC %v", mac)
	}
	if out, err := client.RunTest(t.Context(), "TestChildSeesNamespaceSysfs"); err != nil {
		t.Fatalf("child test failed: %v\n%s", err, out)
	} else if !strings.Contains(out, "--- PASS: TestChildSeesNamespaceSysfs") {
		t.Errorf("child did not run the test:\n%s", out)
	}

	// A shaped path: 8 Mbit/s, then 16 Mbit/s.
	b := server.Bottleneck("vs", 8_000_000, 100_000)
	ln, err := server.Listen(nil, "tcp", "10.77.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	rate := func() float64 {
		c, err := client.Dial(t.Context(), nil, "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.CopyN(io.Discard, c, 200_000) // past slow start
		start := time.Now()
		c.SetReadDeadline(start.Add(time.Second))
		n, _ := io.Copy(io.Discard, c)
		return float64(n*8) / time.Since(start).Seconds()
	}
	if r := rate(); r < 7e6 || r > 8.5e6 {
		t.Errorf("shaped to 8 Mbit/s, measured %.1f Mbit/s", r/1e6)
	}
	if err := b.SetRates(context.Background(), 10*time.Millisecond, []int64{12_000_000, 16_000_000}); err != nil {
		t.Fatal(err)
	}
	if r := rate(); r < 14e6 || r > 17e6 {
		t.Errorf("reshaped to 16 Mbit/s, measured %.1f Mbit/s", r/1e6)
	}
	// Shaping what the client receives, through an IFB: the tighter
	// ingress bottleneck wins.
	client.IngressBottleneck("vc", "ifb0", 6_000_000, 200_000)
	if r := rate(); r < 5.2e6 || r > 6.3e6 {
		t.Errorf("ingress shaped to 6 Mbit/s, measured %.1f Mbit/s", r/1e6)
	}
}
