// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"context"
	"io"
	"net"
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
	if _, err := os.Stat("/sys/class/net/" + ClientDev + "/statistics/rx_bytes"); err != nil {
		t.Fatalf("sysfs of the namespace: %v", err)
	}
}

func TestLab(t *testing.T) {
	if InChild() {
		t.Skip("parent half")
	}
	lab := New(t, "lab")
	client, server := lab.Pair()
	client.Route("default", "via", ServerIP4)

	if v, err := client.ReadSysctl("net.ipv4.ping_group_range"); err != nil || v != "0\t2147483647" {
		t.Errorf("ping_group_range = %q, %v; want unprivileged ICMP allowed", v, err)
	}
	if v, _ := server.ReadSysctl("net.ipv4.ip_forward"); v != "0" {
		t.Errorf("ip_forward = %q before Forward", v)
	}
	if out := client.Exec("ip", "route", "show", "default"); !strings.Contains(out, "via "+ServerIP4+" dev "+ClientDev) {
		t.Errorf("default route: %q", out)
	}
	if out := client.Exec("ethtool", "-k", ClientDev); !strings.Contains(out, "tcp-segmentation-offload: off") || !strings.Contains(out, "generic-receive-offload: off") {
		t.Errorf("offloads still on:\n%s", out)
	}
	if mac := server.HardwareAddr(ServerDev); len(mac) != 6 {
		t.Errorf("server MAC %v", mac)
	}
	if out, err := client.RunTest(t.Context(), "TestChildSeesNamespaceSysfs"); err != nil {
		t.Fatalf("child test failed: %v\n%s", err, out)
	} else if !strings.Contains(out, "--- PASS: TestChildSeesNamespaceSysfs") {
		t.Errorf("child did not run the test:\n%s", out)
	}

	// A shaped WAN: 8 Mbit/s down, then 16 Mbit/s; 6 Mbit/s up, through
	// the IFB device its ingress is redirected to.
	wan := server.WAN(ServerDev, 8_000_000, 6_000_000, 100*time.Millisecond)
	if l := wan.Download.Limit(); l != 100_000 {
		t.Errorf("100 ms of 8 Mbit/s is a %d-byte bfifo, want 100000", l)
	}
	ln, err := server.Listen(CubicListenConfig(), "tcp", ServerIP4+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The first byte a client sends says the direction: 'd', the server
	// streams until the client goes; 'u', it reads warm bytes, answers
	// 'a', reads measured bytes more and answers 'b'. The time from 'a'
	// to 'b' is the time the link took to carry measured bytes.
	const warm, measured = 400_000, 750_000
	AcceptEach(ln, func(c net.Conn) {
		defer c.Close()
		dir := make([]byte, 1)
		if _, err := io.ReadFull(c, dir); err != nil {
			return
		}
		if dir[0] == 'u' {
			io.CopyN(io.Discard, c, warm)
			c.Write([]byte("a"))
			io.CopyN(io.Discard, c, measured)
			c.Write([]byte("b"))
			return
		}
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	dial := func(dir string) net.Conn {
		c, err := client.Dial(t.Context(), CubicDialer(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(dir)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	download := func() float64 {
		c := dial("d")
		defer c.Close()
		io.CopyN(io.Discard, c, warm) // past slow start
		start := time.Now()
		c.SetReadDeadline(start.Add(time.Second))
		n, _ := io.Copy(io.Discard, c)
		return float64(n*8) / time.Since(start).Seconds()
	}
	upload := func() float64 {
		c := dial("u")
		defer c.Close()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		mark := make([]byte, 1)
		if _, err := io.ReadFull(c, mark); err != nil || mark[0] != 'a' {
			t.Fatalf("upload: no mark after the warm-up (%q, %v)", mark, err)
		}
		start := time.Now()
		if _, err := io.ReadFull(c, mark); err != nil || mark[0] != 'b' {
			t.Fatalf("upload: no mark after the measured bytes (%q, %v)", mark, err)
		}
		return float64(measured*8) / time.Since(start).Seconds()
	}
	if r := download(); r < 7e6 || r > 8.5e6 {
		t.Errorf("shaped to 8 Mbit/s down, measured %.1f Mbit/s", r/1e6)
	}
	if err := wan.Download.SetRates(context.Background(), 10*time.Millisecond, []int64{12_000_000, 16_000_000}); err != nil {
		t.Fatal(err)
	}
	if r := download(); r < 14e6 || r > 17e6 {
		t.Errorf("reshaped to 16 Mbit/s down, measured %.1f Mbit/s", r/1e6)
	}
	if r := upload(); r < 5.2e6 || r > 6.3e6 {
		t.Errorf("shaped to 6 Mbit/s up (ingress, through the IFB), measured %.1f Mbit/s", r/1e6)
	}
}
