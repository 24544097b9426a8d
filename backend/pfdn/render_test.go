// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/shape"
)

func TestQuantize(t *testing.T) {
	for _, c := range []struct {
		rate, queue  int64
		kbit, kb     int64
		clampedNotes int
	}{
		{500_000_000, 256 * 1024, 500_000, 256, 0},
		{1_234_567, 10_000, 1235, 10, 0}, // nearest Kbit/s; queue rounded up
		{1_499, 1, 1, 1, 0},              // 1.499 Kbit/s → 1; 1 B → 1 KB
		{400, 1500, 1, 2, 1},             // below 1 Kbit/s: 1 Kbit/s, noted
		{0, 0, 1, 1, 2},                  // never 0 (unlimited) nor a 0-byte queue
		{3_000_000_000, 2 << 20, pfdn.MaxRateKbit, pfdn.MaxQueueKB, 2},
		{2_147_483_000, 1 << 20, 2_147_483, 1024, 0},
		{2_147_483_600, 1<<20 + 1, pfdn.MaxRateKbit, pfdn.MaxQueueKB, 2},
	} {
		q := pfdn.Quantize(shape.Pipe{RateBits: c.rate, QueueBytes: c.queue})
		if q.RateKbit != c.kbit || q.QueueKB != c.kb || len(q.Notes) != c.clampedNotes {
			t.Errorf("Quantize(%d, %d) = %+v, want %d Kbit/s, %d KB, %d notes", c.rate, c.queue, q, c.kbit, c.kb, c.clampedNotes)
		}
	}
	got := pfdn.PipeCommand("/usr/sbin/dnctl", 48001, shape.Pipe{RateBits: 500e6, QueueBytes: 256 << 10}).Argv
	if want := "/usr/sbin/dnctl pipe 48001 config bw 500000Kbit/s queue 256Kbytes"; strings.Join(got, " ") != want {
		t.Errorf("%v", got)
	}
}

func TestFormat(t *testing.T) {
	// Rates print with shape.FormatRateShort (tested there), except what a pipe
	// can have instead of a rate.
	for c, want := range map[pfdn.PipeConfig]string{
		{}:                                      "unlimited, queue 0 B",
		{ClockInterface: "en0", QueueSlots: 50}: "clocked by en0, queue 50 slots",
		{BandwidthBits: 1500, QueueBytes: 1024}: "1.5 kbit/s, queue 1 KB",
		{BandwidthBits: 2_147_483_000, QueueBytes: 1 << 20, DelayMS: 20}: "2.15 Gbit/s, queue 1 MB, delay 20 ms",
	} {
		if got := c.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", c, got, want)
		}
	}
	for n, want := range map[int64]string{1500: "1500 B", 1024: "1 KB", 256 << 10: "256 KB", 1 << 20: "1 MB"} {
		if got := shape.FormatBytes(n); got != want {
			t.Errorf("shape.FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestRenderRules(t *testing.T) {
	l := link("wan", "en0", 3, 20, 250, 64<<10, cloudflare, cloudflare6, netip.MustParseAddr("::ffff:8.8.8.8"), cloudflare)
	d, err := pfdn.Render(state(l), pfdn.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := `no dummynet quick on en0 inet proto icmp from any to 1.1.1.1
no dummynet quick on en0 inet proto icmp from any to 8.8.8.8
no dummynet quick on en0 inet proto icmp from 1.1.1.1 to any
no dummynet quick on en0 inet proto icmp from 8.8.8.8 to any
no dummynet quick on en0 inet6 proto ipv6-icmp from any to 2606:4700:4700::1111
no dummynet quick on en0 inet6 proto ipv6-icmp from 2606:4700:4700::1111 to any
dummynet out on en0 all pipe 48007
dummynet in on en0 all pipe 48008
`
	if got := d.AnchorText(); got != want {
		t.Errorf("anchor text:\n%s\nwant:\n%s", got, want)
	}
	if d.Links[0].Pipes[0].Number != 48007 || d.Links[0].Pipes[1].Number != 48008 {
		t.Errorf("pipes %+v", d.Links[0].Pipes)
	}
	if empty, _ := pfdn.Render(shape.State{}, pfdn.DefaultOptions()); empty.AnchorText() != "" || len(empty.Rules()) != 0 {
		t.Error("an empty state renders an empty anchor")
	}
}

// TestRenderRulesIgnoreReflectorOrder: the exemptions depend on the
// reflector set only, so watch's (sorted, shuffled) sets and a one-shot
// apply's (the policy's order) never see each other's anchor as changed.
func TestRenderRulesIgnoreReflectorOrder(t *testing.T) {
	a, b, c := netip.MustParseAddr("9.9.9.9"), netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("8.8.8.8")
	var first string
	for i, order := range [][]netip.Addr{{a, b, c, cloudflare6}, {cloudflare6, c, b, a}, {b, cloudflare6, a, c}} {
		d, err := pfdn.Render(state(link("wan", "en0", 0, 20, 250, 64<<10, order...)), pfdn.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = d.AnchorText()
			if !strings.HasPrefix(first, "no dummynet quick on en0 inet proto icmp from any to 1.1.1.1\n") {
				t.Errorf("exemptions are not in address order:\n%s", first)
			}
			continue
		}
		if got := d.AnchorText(); got != first {
			t.Errorf("reflectors %v render\n%s\nbut %v render\n%s", order, got, [][]netip.Addr{{a, b, c, cloudflare6}}, first)
		}
	}
}

func TestRenderRefusesWhatCannotBeExpressed(t *testing.T) {
	small := pfdn.DefaultOptions()
	small.Pipes = pfdn.PipeRange{First: 100, Last: 103}
	for _, c := range []struct {
		name string
		s    shape.State
		opts pfdn.Options
		err  string
	}{
		{"two links one interface", state(link("a", "en0", 0, 1, 1, 1), link("b", "en0", 1, 1, 1, 1)), pfdn.DefaultOptions(), "both want interface en0"},
		{"two links one slot", state(link("a", "en0", 0, 1, 1, 1), link("b", "en1", 0, 1, 1, 1)), pfdn.DefaultOptions(), "share slot 0"},
		{"slot outside range", state(link("a", "en0", 2, 1, 1, 1)), small, "outside the pipe range 100-103"},
		{"bad interface", state(link("a", "en0 all pipe 1", 0, 1, 1, 1)), pfdn.DefaultOptions(), "may only hold"},
		{"no interface", state(link("a", "", 0, 1, 1, 1)), pfdn.DefaultOptions(), "empty"},
		{"no name", state(link("", "en0", 0, 1, 1, 1)), pfdn.DefaultOptions(), "no name"},
	} {
		if _, err := pfdn.Render(c.s, c.opts); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.err)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		mutate func(*pfdn.Options)
		err    string
	}{
		{func(o *pfdn.Options) { o.Anchor = "com.apple/_x" }, "'_'"},
		{func(o *pfdn.Options) { o.Anchor = "com.apple/*" }, "wildcard"},
		{func(o *pfdn.Options) { o.Anchor = "com.apple/ma cake" }, "may only hold"},
		{func(o *pfdn.Options) { o.Anchor = strings.Repeat("a", 64) }, "64 bytes"},
		{func(o *pfdn.Options) { o.Pipes = pfdn.PipeRange{First: 65000, Last: 70000} }, "up to 65535"},
		{func(o *pfdn.Options) { o.Pipes = pfdn.PipeRange{First: 5, Last: 5} }, "at least two pipes"},
		{func(o *pfdn.Options) { o.Pfctl = "" }, "paths"},
	} {
		o := pfdn.DefaultOptions()
		c.mutate(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("got %v, want %q", err, c.err)
		}
	}
	env := map[string]string{pfdn.EnvPfctl: "/tmp/pfctl", pfdn.EnvDnctl: "/tmp/dnctl"}
	o := pfdn.DefaultOptions().WithEnv(func(k string) string { return env[k] })
	if o.Pfctl != "/tmp/pfctl" || o.Dnctl != "/tmp/dnctl" {
		t.Errorf("WithEnv: %+v", o)
	}
	if got := pfdn.HookLine("com.apple/macake"); got != `dummynet-anchor "com.apple/*"` {
		t.Errorf("HookLine: %s", got)
	}
	if got := pfdn.HookLine("macake"); got != `dummynet-anchor "macake"` {
		t.Errorf("HookLine top level: %s", got)
	}
}
