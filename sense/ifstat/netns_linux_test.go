// SPDX-License-Identifier: Apache-2.0

package ifstat

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/netns"
)

const (
	payloadDown = 3_000_000
	payloadUp   = 1_000_000
	// TCP over Ethernet with timestamps: 1448 payload bytes per 1514-byte
	// frame as the veth counts it (Ethernet header, no FCS).
	wireOverhead = 1514.0 / 1448.0
)

// TestNetnsCountersTrackRealBytes runs a known transfer through a veth in
// a namespace and compares the sysfs counters with what TCP carried.
func TestNetnsCountersTrackRealBytes(t *testing.T) {
	if netns.InChild() {
		t.Skip("parent half")
	}
	client, server := netns.New(t, "ifstat").Pair()
	server.Bottleneck(netns.ServerDev, 40_000_000, 200_000)

	ln, err := server.Listen(netns.CubicListenConfig(), "tcp", netns.ServerIP4+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	netns.AcceptEach(ln, func(c net.Conn) {
		defer c.Close()
		// Protocol: the client sends payloadUp bytes, then reads
		// payloadDown bytes.
		io.CopyN(io.Discard, c, payloadUp)
		io.CopyN(c, zero{}, payloadDown)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, err := client.RunTest(ctx, "TestNetnsCountersChild", "SERVER="+ln.Addr().String())
	t.Log(out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
}

type zero struct{}

func (zero) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// TestNetnsCountersChild is the in-namespace half.
func TestNetnsCountersChild(t *testing.T) {
	if !netns.InChild() {
		t.Skip("runs inside a namespace, started by TestNetnsCountersTrackRealBytes")
	}
	s := NewSampler(Config{Interface: netns.ClientDev})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	time.Sleep(300 * time.Millisecond)

	d := netns.CubicDialer()
	c, err := d.Dial("tcp", os.Getenv("SERVER"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(c, zero{}, payloadUp); err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, c); n != payloadDown {
		t.Fatalf("received %d bytes (%v), want %d", n, err, payloadDown)
	}
	c.Close()
	time.Sleep(500 * time.Millisecond)

	// The interface disappears mid-run, then a new one takes its name.
	run := func(argv ...string) {
		cmd := execrun.Command{Argv: argv}
		res, err := execrun.Exec{}.Run(context.Background(), cmd)
		if _, err := execrun.Check(cmd, res, err); err != nil {
			t.Fatal(err)
		}
	}
	run("ip", "link", "del", netns.ClientDev)
	time.Sleep(500 * time.Millisecond)
	run("ip", "link", "add", netns.ClientDev, "type", "veth", "peer", "name", "vx")
	run("ip", "link", "set", netns.ClientDev, "up")
	time.Sleep(700 * time.Millisecond)
	cancel()
	<-done

	var rx, tx uint64
	var gone, reindexed, validAfter int
	phase := 0
	for ls := range s.Samples() {
		switch {
		case ls.Valid && phase == 0:
			rx += ls.RxBytes
			tx += ls.TxBytes
		case strings.Contains(ls.Problem, "no such interface"):
			gone++
			phase = 1
		case phase == 1 && !ls.Valid:
			reindexed++ // the new device's first reading is a new baseline
			phase = 2
		case phase == 2 && ls.Valid:
			validAfter++
		}
	}
	rxWant := float64(payloadDown) * wireOverhead
	txWant := float64(payloadUp) * wireOverhead
	t.Logf("rx %d bytes (payload %d, %.3f×), tx %d bytes (payload %d, %.3f×)", rx, payloadDown, float64(rx)/payloadDown, tx, payloadUp, float64(tx)/payloadUp)
	// Within a few percent of the wire bytes; the rest is ACKs, the
	// handshake and the teardown.
	if f := float64(rx) / rxWant; f < 0.99 || f > 1.04 {
		t.Errorf("rx counter %d is %.3f× the %0.f wire bytes of the download", rx, f, rxWant)
	}
	if f := float64(tx) / txWant; f < 0.99 || f > 1.15 {
		t.Errorf("tx counter %d is %.3f× the %0.f wire bytes of the upload", tx, f, txWant)
	}
	if gone == 0 || reindexed == 0 || validAfter == 0 {
		t.Errorf("vanish and return: %d missing, %d re-baselined, %d valid after; want all > 0", gone, reindexed, validAfter)
	}
}
