// SPDX-License-Identifier: Apache-2.0

package ifstat

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/internal/golden"
)

func TestDiff(t *testing.T) {
	const g4 = 1 << 32
	for _, tc := range []struct {
		name       string
		prev, cur  Counters
		rxB, txB   uint64
		rxP, txP   uint64
		problemHas string
	}{
		{"plain increase", Counters{RxBytes: 1000, TxBytes: 50, RxPackets: 10, TxPackets: 2}, Counters{RxBytes: 4000, TxBytes: 150, RxPackets: 12, TxPackets: 3}, 3000, 100, 2, 1, ""},
		{"64-bit counters past 4 GiB", Counters{RxBytes: 5 * g4, RxPackets: 1}, Counters{RxBytes: 5*g4 + 10, RxPackets: 2}, 10, 0, 1, 0, ""},
		{"32-bit wrap", Counters{RxBytes: g4 - 100, RxPackets: 1}, Counters{RxBytes: 50, RxPackets: 2}, 150, 0, 1, 0, ""},
		{"reset from a small value is not a wrap", Counters{RxBytes: 1 << 20, RxPackets: 100}, Counters{RxBytes: 10, RxPackets: 1}, 0, 0, 0, 0, "went backwards"},
		{"reset from above 4 GiB", Counters{TxBytes: 6 * g4}, Counters{TxBytes: 3}, 0, 0, 0, 0, "went backwards"},
		{"new interface index", Counters{Index: 4, RxBytes: 10}, Counters{Index: 7, RxBytes: 20}, 0, 0, 0, 0, "index changed"},
		{"receive bytes stuck", Counters{RxBytes: 0, RxPackets: 100}, Counters{RxBytes: 0, RxPackets: 150, TxBytes: 900, TxPackets: 10}, 0, 900, 50, 10, "receive bytes stuck"},
		{"transmit bytes stuck", Counters{TxPackets: 100}, Counters{TxPackets: 120}, 0, 0, 0, 20, "transmit bytes stuck"},
		{"a few packets without bytes is noise", Counters{RxPackets: 100}, Counters{RxPackets: 103}, 0, 0, 3, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Diff(tc.prev, tc.cur)
			if d.RxBytes != tc.rxB || d.TxBytes != tc.txB || d.RxPackets != tc.rxP || d.TxPackets != tc.txP {
				t.Errorf("got %+v, want %d %d %d %d", d, tc.rxB, tc.txB, tc.rxP, tc.txP)
			}
			if (tc.problemHas == "") != (d.Problem == "") || !strings.Contains(d.Problem, tc.problemHas) {
				t.Errorf("problem %q, want one containing %q", d.Problem, tc.problemHas)
			}
			if d.Stuck != strings.Contains(tc.problemHas, "stuck") || d.Reset != (d.Problem != "" && !d.Stuck) {
				t.Errorf("flags %+v for problem %q", d, d.Problem)
			}
		})
	}
}

// ifmib builds one struct ifmibdata at the offsets of xnu's
// bsd/net/if_mib.h and if_var.h (as tabulated in the reference), with
// every other field filled with a recognisable pattern.
func ifmib(name string, c Counters) []byte {
	b := make([]byte, ifmibdataSize)
	for i := 16; i < len(b); i++ {
		b[i] = 0xa5 // fields we must not read
	}
	copy(b, name)
	for i := len(name); i < 16; i++ {
		b[i] = 0
	}
	d := b[ifmibDataOff:]
	binary.LittleEndian.PutUint64(d[ifdIPackets:], c.RxPackets)
	binary.LittleEndian.PutUint64(d[ifdOPackets:], c.TxPackets)
	binary.LittleEndian.PutUint64(d[ifdIBytes:], c.RxBytes)
	binary.LittleEndian.PutUint64(d[ifdOBytes:], c.TxBytes)
	return b
}

// ifinfo2 builds an RTM_IFINFO2 message (struct if_msghdr2 + sockaddr_dl)
// the way NET_RT_IFLIST2 returns it to a program not signed by Apple:
// bytes rounded down to 1 KiB and truncated to 32 bits.
func ifinfo2(name string, index int, c Counters) []byte {
	sdl := make([]byte, 20)
	sdl[0] = 20
	sdl[1] = afLink
	binary.LittleEndian.PutUint16(sdl[2:], uint16(index))
	sdl[4] = 6 // IFT_ETHER
	sdl[5] = byte(len(name))
	sdl[6] = 6
	copy(sdl[8:], name)
	b := make([]byte, ifMsghdr2Size, ifMsghdr2Size+len(sdl))
	binary.LittleEndian.PutUint16(b, uint16(ifMsghdr2Size+len(sdl)))
	b[2] = 5 // RTM_VERSION
	b[3] = rtmIFINFO2
	binary.LittleEndian.PutUint32(b[4:], 0x10) // RTA_IFP
	binary.LittleEndian.PutUint16(b[ifm2IndexOff:], uint16(index))
	d := b[ifm2DataOff:]
	binary.LittleEndian.PutUint64(d[ifdIPackets:], c.RxPackets)
	binary.LittleEndian.PutUint64(d[ifdOPackets:], c.TxPackets)
	binary.LittleEndian.PutUint64(d[ifdIBytes:], uint64(uint32(c.RxBytes&^1023)))
	binary.LittleEndian.PutUint64(d[ifdOBytes:], uint64(uint32(c.TxBytes&^1023)))
	return append(b, sdl...)
}

// newaddr is an RTM_NEWADDR message (ifa_msghdr, 20 bytes, plus one
// sockaddr_in) as it follows each IFINFO2 message in the dump.
func newaddr() []byte {
	b := make([]byte, 20+16)
	binary.LittleEndian.PutUint16(b, uint16(len(b)))
	b[2], b[3] = 5, 0xc
	b[20], b[21] = 16, 2
	return b
}

var (
	en0 = Counters{RxBytes: 5_000_000_123, TxBytes: 1_234_567, RxPackets: 3_600_001, TxPackets: 900_002}
	lo0 = Counters{RxBytes: 77, TxBytes: 77, RxPackets: 1, TxPackets: 1}
)

func recordedLayouts() map[string][]byte {
	var all bytes.Buffer
	all.Write(ifmib("lo0", lo0))
	all.Write(make([]byte, ifmibdataSize)) // a detached interface: zeroed record
	all.Write(ifmib("en0", en0))
	all.Write(ifmib("utun3", Counters{}))
	var l2 bytes.Buffer
	l2.Write(ifinfo2("lo0", 1, lo0))
	l2.Write(newaddr())
	l2.Write(ifinfo2("en0", 14, en0))
	l2.Write(newaddr())
	return map[string][]byte{"ifalldata.bin": all.Bytes(), "iflist2.bin": l2.Bytes()}
}

func TestRecordedDarwinLayouts(t *testing.T) {
	for name, want := range recordedLayouts() {
		golden.Check(t, filepath.Join("testdata", name), want, "the recording must be the layout built from the reference offsets")
	}

	b, _ := os.ReadFile("testdata/ifalldata.bin")
	recs, err := ParseIfAllData(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0].Name != "lo0" || recs[1].Name != "en0" || recs[2].Name != "utun3" {
		t.Fatalf("records %+v; want lo0, en0, utun3 (zeroed record skipped)", recs)
	}
	if recs[1].Counters != en0 {
		t.Errorf("en0 = %+v, want %+v (64-bit, unrounded)", recs[1].Counters, en0)
	}
	if _, err := find(recs, "en9"); !errors.Is(err, ErrNoInterface) {
		t.Errorf("find(en9) = %v", err)
	}

	b, _ = os.ReadFile("testdata/iflist2.bin")
	recs, err = ParseIfList2(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[1].Name != "en0" || recs[1].Index != 14 || !recs[1].Rounded {
		t.Fatalf("records %+v", recs)
	}
	c := recs[1].Counters
	// The trap this package avoids: IFLIST2 gives 5 000 000 123 bytes as
	// (5 000 000 123 rounded down to 1 KiB) mod 2^32.
	if c.RxBytes != 705_032_192 || c.RxPackets != en0.RxPackets {
		t.Errorf("iflist2 en0 = %+v; want rx bytes 705032192 (rounded, truncated), packets exact", c)
	}
}

func TestParsersRejectDamagedDumps(t *testing.T) {
	if _, err := ParseIfAllData(make([]byte, ifmibdataSize+7)); err == nil {
		t.Error("ifalldata with a partial record accepted")
	}
	msg := ifinfo2("en0", 4, en0)
	for _, bad := range [][]byte{
		msg[:len(msg)-3],                 // truncated
		append([]byte{2, 0}, msg[2:]...), // msglen too small
		{1, 2, 3},                        // trailing bytes
	} {
		if _, err := ParseIfList2(bad); err == nil {
			t.Errorf("damaged iflist2 % x... accepted", bad[:min(8, len(bad))])
		}
	}
}

func FuzzParseIfAllData(f *testing.F) {
	for _, b := range recordedLayouts() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := ParseIfAllData(b)
		if err == nil && len(recs) > len(b)/ifmibdataSize {
			t.Fatal("more records than bytes allow")
		}
	})
}

func FuzzParseIfList2(f *testing.F) {
	for _, b := range recordedLayouts() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseIfList2(b)
	})
}

// fakeReader serves scripted counter readings, one per Read.
type fakeReader struct {
	mu    sync.Mutex
	steps []func() (Counters, error)
	i     int
}

func (f *fakeReader) Read(iface string) (Counters, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.i >= len(f.steps) {
		return f.steps[len(f.steps)-1]()
	}
	f.i++
	return f.steps[f.i-1]()
}

func ok(rx, tx, rxp, txp uint64) func() (Counters, error) {
	return func() (Counters, error) {
		return Counters{RxBytes: rx, TxBytes: tx, RxPackets: rxp, TxPackets: txp, Index: 3}, nil
	}
}

func gone() (Counters, error) {
	return Counters{}, fmt.Errorf("reading counters of en0: %w", ErrNoInterface)
}

func TestSamplerFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeReader{steps: []func() (Counters, error){
			ok(0, 0, 0, 0),                // baseline
			ok(250_000, 25_000, 200, 100), // 10 Mbit/s down, 1 Mbit/s up
			ok(500_000, 50_000, 400, 200), // same
			ok(100, 10, 2, 1),             // went backwards: reset
			ok(250_100, 25_010, 202, 101), // valid again
			gone,                          // interface disappeared
			gone,                          //
			ok(1000, 0, 10, 0),            // back: baseline
			ok(1000, 1000, 60, 10),        // rx bytes stuck while 50 packets arrived
			ok(126_000, 1000, 160, 10),    // valid
		}}
		s := NewSampler(Config{Reader: r, Interface: "en0"})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		time.Sleep(9*DefaultInterval + time.Millisecond)
		cancel()
		<-done
		var got []LoadSample
		for ls := range s.Samples() {
			got = append(got, ls)
		}
		if len(got) != 10 {
			t.Fatalf("%d samples, want 10", len(got))
		}
		wantValid := []bool{false, true, true, false, true, false, false, false, false, true}
		for i, ls := range got {
			if ls.Valid != wantValid[i] {
				t.Errorf("sample %d: valid=%v (%s), want %v", i, ls.Valid, ls.Problem, wantValid[i])
			}
			if !ls.Valid && ls.Problem == "" {
				t.Errorf("sample %d invalid without a reason", i)
			}
			if ls.Valid && ls.Interval != DefaultInterval {
				t.Errorf("sample %d interval %v", i, ls.Interval)
			}
		}
		if r := got[1].RxBitsPerSecond(); r != 10e6 {
			t.Errorf("rx rate %v, want 10 Mbit/s", r)
		}
		if r := got[1].TxBitsPerSecond(); r != 1e6 {
			t.Errorf("tx rate %v, want 1 Mbit/s", r)
		}
		if r := got[3].RxBitsPerSecond(); r != 0 {
			t.Errorf("a reset reported %v bit/s", r)
		}
		if got[4].RxBytes != 250_000 {
			t.Errorf("after reset: %d bytes, want 250000 from the new baseline", got[4].RxBytes)
		}
		if !strings.Contains(got[5].Problem, "no such interface") {
			t.Errorf("missing interface problem %q", got[5].Problem)
		}
		if got[1].Counters.RxBytes != 250_000 || got[2].Counters.TxBytes != 50_000 || !got[5].ReadFailed || got[5].Counters != (Counters{}) {
			t.Errorf("raw counters not carried: %+v %+v %+v", got[1], got[2], got[5])
		}
		if !strings.Contains(got[8].Problem, "stuck") || !got[8].Stuck || got[9].Stuck {
			t.Errorf("stuck problem %q", got[8].Problem)
		}
		if got[9].RxBytes != 125_000 {
			t.Errorf("after the stuck sample: %d bytes", got[9].RxBytes)
		}
	})
}

func TestSamplerGapAndSlowConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n uint64
		r := &fakeReader{steps: []func() (Counters, error){func() (Counters, error) {
			n += 1000
			return Counters{RxBytes: n, RxPackets: n / 100}, nil
		}}}
		s := NewSampler(Config{Reader: r, Interface: "en0", Buffer: 3})
		ls := s.Read(time.Now()) // baseline
		time.Sleep(10 * DefaultInterval)
		if ls = s.Read(time.Now()); ls.Valid || !strings.Contains(ls.Problem, "gap") {
			t.Errorf("a reading 2 s after the previous one: %+v", ls)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		time.Sleep(10 * DefaultInterval)
		cancel()
		<-done
		if d := s.Dropped(); d != 8 {
			t.Errorf("dropped %d, want 8 (11 samples into a buffer of 3)", d)
		}
	})
}

func TestSysfsReader(t *testing.T) {
	root := t.TempDir()
	write := func(iface, file, v string) {
		p := filepath.Join(root, iface, file)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("eth0", "ifindex", "2")
	for i, f := range []string{"rx_bytes", "tx_bytes", "rx_packets", "tx_packets"} {
		write("eth0", "statistics/"+f, fmt.Sprint(18446744073709551000+uint64(i)))
	}
	r := NewSysfsReader(root)
	c, err := r.Read("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if c.RxBytes != 18446744073709551000 || c.TxPackets != 18446744073709551003 || c.Index != 2 {
		t.Errorf("counters %+v", c)
	}
	for _, bad := range []string{"eth9", "", "../eth0", "."} {
		if _, err := r.Read(bad); !errors.Is(err, ErrNoInterface) {
			t.Errorf("Read(%q) = %v, want ErrNoInterface", bad, err)
		}
	}
}

func TestAgreeWithinRounding(t *testing.T) {
	before := Counters{Index: 1, RxBytes: 5000, TxBytes: 1<<32 - 100, RxPackets: 10, TxPackets: 20}
	after := Counters{Index: 1, RxBytes: 9000, TxBytes: 1<<32 + 900, RxPackets: 12, TxPackets: 21}
	for _, tt := range []struct {
		name    string
		rounded Counters
		want    int
	}{
		{"within, the sent bytes wrapped", Counters{Index: 1, RxBytes: 4096, TxBytes: 512, RxPackets: 11, TxPackets: 20, Rounded: true}, 0},
		{"within, before the wrap", Counters{Index: 1, RxBytes: 8192, TxBytes: 1<<32 - 1024, RxPackets: 12, TxPackets: 21}, 0},
		{"bytes beyond the later reading", Counters{Index: 1, RxBytes: 10240, TxBytes: 512, RxPackets: 11, TxPackets: 20}, 1},
		{"packets counted twice, another index", Counters{Index: 2, RxBytes: 8192, TxBytes: 512, RxPackets: 24, TxPackets: 42}, 3},
		{"sent bytes between the wrapped bounds", Counters{Index: 1, RxBytes: 8192, TxBytes: 1 << 31, RxPackets: 11, TxPackets: 20}, 1},
	} {
		if got := AgreeWithinRounding(before, tt.rounded, after); len(got) != tt.want {
			t.Errorf("%s: %q, want %d problems", tt.name, got, tt.want)
		}
	}
}
