// SPDX-License-Identifier: Apache-2.0

package pfcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/selftest/check"
	"github.com/macake/macake/selftest/loopback"
	"github.com/macake/macake/shape"
)

// The lo0 measurement's pipe: a rate a Mac's loopback carries easily and a
// queue of many 16 KB loopback packets, whose Q/R (105 ms) dwarfs
// dummynet's 1 ms timer.
var measuredPipe = shape.Pipe{RateBits: 20_000_000, QueueBytes: 256 << 10}

// The rules macake would render for a link on lo0 with one reflector of
// each family: `pfctl -nv` must print them back exactly (pfcheck only
// parses them, -n loads nothing).
var printbackReflectors = []shape.Reflector{
	shape.ICMPReflector(netip.MustParseAddr("192.0.2.1")), shape.ICMPReflector(netip.MustParseAddr("2001:db8::1")),
	{Kind: shape.ProbeTCP, Addr: netip.MustParseAddr("192.0.2.2"), Port: 443},
	{Kind: shape.ProbeUDP, Addr: netip.MustParseAddr("2001:db8::2"), Port: 53},
}

func pfctl(args ...string) check.Call { return check.Call{Argv: append([]string{"{pfctl}"}, args...)} }
func dnctl(args ...string) check.Call { return check.Call{Argv: append([]string{"{dnctl}"}, args...)} }

// The exact lines of `pfctl -a ANCHOR -F all` (reference §3.6).
const flushedAll = "rules cleared\nnat cleared\ndummynet cleared\n0 tables deleted.\n"

// Checks returns the suite's checks, in the order they run. The order is
// macake's own (reference §2.3): pipes exist before a rule names them, the
// rule is gone before the pipes are deleted, and the pf reference is
// released last.
func (s *Suite) Checks() []check.Check {
	scratchRule := "dummynet out quick on lo0 proto tcp from any to 127.0.0.1 port {port} pipe {pipe}\n"
	configPipe := pfdn.PipeCommand("{dnctl}", s.pipe, measuredPipe).Argv
	rendered, renderErr := s.printbackRules()
	cs := []check.Check{
		{
			ID: "pfctl.altq", Ref: "§3.2", Fact: "pfctl prints the two ALTQ lines on stderr of every call that opens /dev/pf (the open question)",
			Steps: []check.Step{{Call: pfctl("-s", "info"), Normalize: []check.Normalizer{onlyStderr}}},
		},
		{
			ID: "pfctl.info", Ref: "§3.3", Fact: "pfctl -s info prints the Status line and counters macake reads",
			Steps: []check.Step{{Call: pfctl("-s", "info"), Normalize: []check.Normalizer{noALTQ, infoValues}, Accept: acceptInfo}},
		},
		{
			ID: "pfctl.references", Ref: "§3.3", Fact: "pfctl -s References lists the enable tokens (or says none are held)",
			Steps: []check.Step{{Call: pfctl("-s", "References"), Normalize: []check.Normalizer{noALTQ, referenceRows}, Accept: acceptReferences("")}},
		},
		{
			ID: "pfctl.hook", Ref: "§3.8", Fact: `the main ruleset holds dummynet-anchor "com.apple/*", which evaluates macake's anchor`,
			Steps: []check.Step{{Call: pfctl("-s", "dummynet"), Normalize: []check.Normalizer{noALTQ, onlyLinesWith("the hook", pfdn.HookLine(pfdn.DefaultAnchor))}, Accept: acceptHook}},
		},
		{
			ID: "pfctl.anchor-absent", Ref: "§3.3", Fact: "showing an anchor that does not exist says DIOCGETRULES: Invalid argument and exits 0",
			Steps: []check.Step{{Call: pfctl("-a", "{anchor}", "-s", "dummynet"), Normalize: []check.Normalizer{noALTQ}, Accept: acceptAnchor(false, 0)}},
		},
		{
			ID: "pfctl.printback", Ref: "§3.4", Fact: "pfctl prints back the rules macake renders exactly as macake wrote them",
			Skip: func() string {
				if renderErr != nil {
					return "rendering the rules failed: " + renderErr.Error()
				}
				return ""
			},
			Steps: []check.Step{{
				Call: check.Call{Argv: []string{"{pfctl}", "-n", "-v", "-a", "{anchor}", "-f", "-"}, Stdin: rendered},
				Accept: func(a check.Answer, _ *check.Side) error {
					if a.Stdout != rendered {
						return fmt.Errorf("printed %q, macake rendered %q", a.Stdout, rendered)
					}
					return nil
				},
			}},
		},
		{
			ID: "pfctl.enable", Ref: "§3.2", Fact: "pfctl -E takes a pf reference and prints pf enabled and its token on stderr",
			Steps: []check.Step{
				{Call: pfctl("-E"), Normalize: []check.Normalizer{noALTQ, tokens}, Capture: s.captureToken("token")},
				{Call: pfctl("-s", "info"), Normalize: []check.Normalizer{noALTQ, firstLine, infoValues}, Accept: acceptEnabled},
			},
		},
		{
			ID: "pfctl.references-token", Ref: "§3.3", Needs: []string{"pfctl.enable"}, Fact: "pfctl -s References lists macake's token, newest first",
			Steps: []check.Step{{Call: pfctl("-s", "References"), Normalize: []check.Normalizer{noALTQ, referenceRows}, Accept: acceptReferences("token")}},
		},
		{
			ID: "pfctl.release-counted", Ref: "§3.2", Needs: []string{"pfctl.enable"}, Fact: "pfctl -X of one of several references says how many remain and keeps pf enabled",
			Steps: []check.Step{
				{Call: pfctl("-E"), Normalize: []check.Normalizer{noALTQ, tokens}, Capture: s.captureToken("token2")},
				{Call: pfctl("-X", "{token2}"), Normalize: []check.Normalizer{noALTQ}},
			},
		},
		{
			ID: "pfctl.release-stale", Ref: "§3.2", Needs: []string{"pfctl.release-counted"}, Fact: "pfctl -X of a released token says pf: token invalid and exits 1",
			Steps: []check.Step{{Call: pfctl("-X", "{token2}"), Normalize: []check.Normalizer{noALTQ}}},
		},
		{
			ID: "dnctl.config", Ref: "§1.4, §1.7", Fact: "the pipe command macake sends is accepted silently and listed as macake quantised it",
			Steps: []check.Step{
				{Call: dnctl("pipe", "show", "{pipe}"), Normalize: []check.Normalizer{onlyPipes("pipe")}},
				{Call: check.Call{Argv: configPipe}},
				{Call: dnctl("pipe", "show", "{pipe}"), Normalize: []check.Normalizer{onlyPipes("pipe")}, Accept: acceptPipe("pipe", pfdn.Quantize(measuredPipe).Config(), true)},
			},
		},
		{
			ID: "dnctl.rounding", Ref: "§1.7", Fact: "dnctl lists rates with 3 decimals of Kbit/s or Mbit/s and byte queues from 8 KB in whole KB (integer division)",
			Steps: roundingSteps(),
		},
		{
			ID: "dnctl.replace", Ref: "§1.4", Fact: "pipe N config replaces the whole configuration: what is not given reverts to its default",
			Steps: []check.Step{
				{Call: dnctl("pipe", "{pipe2}", "config", "delay", "20")},
				{Call: dnctl("pipe", "show", "{pipe2}"), Normalize: []check.Normalizer{onlyPipes("pipe2")}},
			},
		},
		{
			ID: "dnctl.limits", Ref: "§1.5", Fact: "dnctl refuses a byte queue over 1 MB, a slot queue over 100 and a rate over 2147 Mbit/s (exit 65) and keeps the pipe",
			Steps: []check.Step{
				{Call: dnctl("pipe", "{pipe2}", "config", "bw", "1000Kbit/s", "queue", "1025Kbytes")},
				{Call: dnctl("pipe", "{pipe2}", "config", "queue", "101")},
				{Call: dnctl("pipe", "{pipe2}", "config", "bw", "2148Mbit/s")},
				{Call: dnctl("pipe", "show", "{pipe2}"), Normalize: []check.Normalizer{onlyPipes("pipe2")}},
			},
		},
		{
			ID: "dnctl.traps", Ref: "§1.4", Fact: "dnctl reads 1.5Mbit/s as 1 bit/s, 010 as octal and queue 1M as 1 slot (why macake sends whole decimal Kbit/s and Kbytes)",
			Steps: []check.Step{
				{Call: dnctl("pipe", "{pipe2}", "config", "bw", "1.5Mbit/s")},
				{Call: dnctl("pipe", "show", "{pipe2}"), Normalize: []check.Normalizer{onlyPipes("pipe2")}},
				{Call: dnctl("pipe", "{pipe2}", "config", "bw", "010Kbit/s", "queue", "1M")},
				{Call: dnctl("pipe", "show", "{pipe2}"), Normalize: []check.Normalizer{onlyPipes("pipe2")}},
			},
		},
		{
			ID: "dnctl.order", Ref: "§1.7", Needs: []string{"dnctl.config"}, Fact: "dnctl list orders pipes by hash bucket, newest first within one",
			Steps: []check.Step{{Call: dnctl("list"), Normalize: []check.Normalizer{onlyPipes("pipe", "pipe2")}, Accept: acceptOrder}},
		},
		{
			ID: "dnctl.delete-needs-pipe", Ref: "§1.3", Fact: "dnctl delete N without the word pipe deletes queue N, not pipe N",
			Steps: []check.Step{
				{Call: dnctl("delete", "{pipe2}")},
				{Call: dnctl("pipe", "show", "{pipe2}"), Normalize: []check.Normalizer{onlyPipes("pipe2")}, Accept: acceptPipeListed("pipe2")},
			},
		},
		{
			ID: "pfctl.load", Ref: "§3.5", Needs: []string{"dnctl.config"}, Fact: "pfctl -a ANCHOR -f - loads rules into a new anchor, with the -f warning on stderr",
			Steps: []check.Step{{Call: check.Call{Argv: []string{"{pfctl}", "-a", "{anchor}", "-f", "-"}, Stdin: scratchRule}, Normalize: []check.Normalizer{noALTQ}}},
		},
		{
			ID: "pfctl.anchor-rules", Ref: "§3.4", Needs: []string{"pfctl.load"}, Fact: "pfctl -a ANCHOR -s dummynet prints the rule normalised (inet from the address, port = N)",
			Steps: []check.Step{{Call: pfctl("-a", "{anchor}", "-s", "dummynet"), Normalize: []check.Normalizer{noALTQ}, Accept: acceptAnchor(true, s.pipe)}},
		},
		{
			ID: "pfctl.anchor-listed", Ref: "§3.3, §3.9", Needs: []string{"pfctl.load"}, Fact: "pfctl -a com.apple -s Anchors lists the new child with two spaces and its full path",
			Steps: []check.Step{{Call: pfctl("-a", "com.apple", "-s", "Anchors"), Normalize: []check.Normalizer{noALTQ, onlyLinesWith("the scratch anchor", "  {anchor}\n")}, Accept: acceptListed}},
		},
		{
			ID: "pfctl.parse-error", Ref: "§3.5, §3.7", Needs: []string{"pfctl.load"}, Fact: "a rule without direction is refused (stdin:1, exit 1) and the anchor keeps its rules",
			Steps: []check.Step{
				{Call: check.Call{Argv: []string{"{pfctl}", "-a", "{anchor}", "-f", "-"}, Stdin: "dummynet all pipe {pipe}\n"}, Normalize: []check.Normalizer{noALTQ}},
				{Call: pfctl("-a", "{anchor}", "-s", "dummynet"), Normalize: []check.Normalizer{noALTQ}, Accept: acceptAnchor(true, s.pipe)},
			},
		},
		{
			ID: "dnctl.traffic", Ref: "§1.7, §2.8", Needs: []string{"pfctl.hook", "pfctl.enable", "pfctl.load"},
			Fact: "traffic the anchor's rule matches reaches the pipe: one flow queue, mask and header printed twice",
			Steps: []check.Step{{
				Call:      dnctl("pipe", "show", "{pipe}"),
				Before:    s.sendTraffic,
				Normalize: []check.Normalizer{onlyPipes("pipe"), flowCounters},
				Accept:    acceptFlows,
			}},
		},
		s.measureCheck(),
		{
			ID: "pfctl.flush", Ref: "§3.6, §3.9", Needs: []string{"pfctl.load"}, Fact: "pfctl -a ANCHOR -F all prints its four lines; the emptied anchor is deleted",
			Steps: []check.Step{
				{Call: pfctl("-a", "{anchor}", "-F", "all"), Normalize: []check.Normalizer{noALTQ}, Accept: acceptStderr(flushedAll)},
				{Call: pfctl("-a", "{anchor}", "-s", "dummynet"), Normalize: []check.Normalizer{noALTQ}, Accept: acceptAnchor(false, 0)},
				{Call: pfctl("-a", "com.apple", "-s", "Anchors"), Normalize: []check.Normalizer{noALTQ, onlyLinesWith("the scratch anchor", "  {anchor}\n")}},
			},
		},
		{
			ID: "pfctl.flush-missing", Ref: "§3.6", Fact: "flushing an anchor that does not exist succeeds with the same four lines",
			Steps: []check.Step{{Call: pfctl("-a", "{anchor}", "-F", "all"), Normalize: []check.Normalizer{noALTQ}, Accept: acceptStderr(flushedAll)}},
		},
		{
			ID: "dnctl.delete", Ref: "§1.3", Fact: "pipe delete N is silent; deleting a missing pipe says rule N: setsockopt(IP_DUMMYNET_DEL): Invalid argument, exit 1",
			Steps: []check.Step{
				{Call: dnctl("pipe", "delete", "{pipe2}")},
				{Call: dnctl("pipe", "delete", "{pipe2}")},
				{Call: dnctl("pipe", "delete", "{pipe}")},
				{Call: dnctl("list"), Normalize: []check.Normalizer{onlyPipes("pipe", "pipe2")}},
			},
		},
		{
			ID: "pfctl.release", Ref: "§3.2", Needs: []string{"pfctl.enable"}, Fact: "pfctl -X of macake's token gives its reference back; once more, it is refused (exit 1)",
			Steps: []check.Step{
				{Call: pfctl("-X", "{token}"), Normalize: []check.Normalizer{noALTQ}},
				{Call: pfctl("-X", "{token}"), Normalize: []check.Normalizer{noALTQ}},
				{Call: pfctl("-s", "References"), Normalize: []check.Normalizer{noALTQ, referenceRows}},
			},
		},
	}
	return append(cs, systemChecks()...)
}

// roundingSteps configures the second scratch pipe several ways and lists
// it after each: the display's resolution is what macake quantises for.
func roundingSteps() []check.Step {
	var steps []check.Step
	for _, c := range []struct {
		args []string
		want *pfdn.Quantized // the configuration macake's parser must read, for what macake itself sends
	}{
		{[]string{"bw", "999Kbit/s", "queue", "7Kbytes"}, &pfdn.Quantized{RateKbit: 999, QueueKB: 7}},
		{[]string{"bw", "1001Kbit/s", "queue", "8Kbytes"}, &pfdn.Quantized{RateKbit: 1001, QueueKB: 8}},
		{[]string{"bw", "1Kbit/s", "queue", "1Kbytes"}, &pfdn.Quantized{RateKbit: 1, QueueKB: 1}},
		{[]string{"bw", strconv.Itoa(pfdn.MaxRateKbit) + "Kbit/s", "queue", strconv.Itoa(pfdn.MaxQueueKB) + "Kbytes"}, &pfdn.Quantized{RateKbit: pfdn.MaxRateKbit, QueueKB: pfdn.MaxQueueKB}},
		{[]string{"bw", "1234567bit/s", "queue", "10000B"}, nil},
	} {
		steps = append(steps, check.Step{Call: dnctl(append([]string{"pipe", "{pipe2}", "config"}, c.args...)...)})
		show := check.Step{Call: dnctl("pipe", "show", "{pipe2}"), Normalize: []check.Normalizer{onlyPipes("pipe2")}}
		if c.want != nil {
			show.Accept = acceptPipe("pipe2", c.want.Config(), false)
		}
		steps = append(steps, show)
	}
	return steps
}

// printbackRules renders, as macake would, a link on lo0 in the scratch
// range with reflectors of both families.
func (s *Suite) printbackRules() (string, error) {
	opts := pfdn.DefaultOptions()
	opts.Anchor, opts.Pipes = ScratchAnchor, ScratchPipes
	d, err := pfdn.Render(shape.State{Links: []shape.Link{{
		Name: "selftest", Interface: "lo0", Slot: 0,
		Upload: measuredPipe, Download: measuredPipe, Reflectors: printbackReflectors,
	}}}, opts)
	if err != nil {
		return "", err
	}
	return d.AnchorText(), nil
}

// captureToken reads the token pfctl -E printed into the side's Vars and,
// on the real side, into the ledger before anything else happens.
func (s *Suite) captureToken(name string) func(a check.Answer, side *check.Side) error {
	return func(a check.Answer, side *check.Side) error {
		tok, err := pfdn.ParseEnableToken([]byte(a.Stderr))
		if err != nil {
			return err
		}
		side.Vars[name] = tok
		if side.Real {
			return s.opts.Ledger.AddToken(tok)
		}
		return nil
	}
}

// sendTraffic makes a few packets to the scratch port on each side: real
// TCP on a Mac, an emulated packet in the emulator.
func (s *Suite) sendTraffic(ctx context.Context, side *check.Side) error {
	dst := s.server.Addr()
	if !side.Real {
		return EmulatorTraffic(s.emu)(ctx, dst)
	}
	if s.opts.Traffic != nil {
		return s.opts.Traffic(ctx, dst)
	}
	return loopback.Send(ctx, s.dial, 32<<10)
}

func (s *Suite) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp4", s.server.Addr().String())
}

// EmulatorTraffic sends one packet to dst through an in-process
// emulator's pf, as a TCP connection from lo0 would.
func EmulatorTraffic(e *pfdntest.Emulator) Traffic {
	return func(_ context.Context, dst netip.AddrPort) error {
		r := e.Probe(emulatedPacket(dst))
		if r.Verdict != pfdntest.Shaped {
			return fmt.Errorf("the emulated packet was %s: %s", r.Verdict, r.Reason)
		}
		return nil
	}
}

// EmulatorFileTraffic is EmulatorTraffic for the emulator binaries'
// state file (PFDN_EMU_STATE).
func EmulatorFileTraffic(stateFile string) Traffic {
	return func(ctx context.Context, dst netip.AddrPort) error {
		return pfdntest.UpdateFile(stateFile, func(e *pfdntest.Emulator) error { return EmulatorTraffic(e)(ctx, dst) })
	}
}

func emulatedPacket(dst netip.AddrPort) pfdntest.Packet {
	return pfdntest.Packet{Interface: "lo0", Out: true, Proto: "tcp",
		Src: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 49152), Dst: dst, Bytes: 1500}
}

// measureCheck is the lo0 measurement: the pipe dnctl.config made, the
// scratch rule, a short TCP stream; the rate and queueing delay against
// the pipe's.
func (s *Suite) measureCheck() check.Check {
	return check.Check{
		ID: "lo0.shaping", Ref: "§2.4, §2.6", Needs: []string{"pfctl.hook", "pfctl.enable", "pfctl.load", "dnctl.config"},
		Fact: "a pipe shapes lo0 traffic to its rate and a full queue adds Q/R, as the simulator assumes",
		Skip: func() string {
			switch {
			case s.opts.NoPacketPath != "":
				return s.opts.NoPacketPath
			case s.opts.SkipMeasure:
				return "skipped on request (--quick)"
			}
			return ""
		},
		Probe: func(ctx context.Context) check.Result {
			measure := func(ctx context.Context) (loopback.Measurement, error) {
				return loopback.Measure(ctx, s.server, s.dial, s.opts.Measure)
			}
			return check.Measured(ctx, measure, loopback.Expectation{RateBits: measuredPipe.RateBits, QueueBytes: measuredPipe.QueueBytes})
		},
	}
}

// --- what each answer must satisfy on its own ---

func acceptInfo(a check.Answer, _ *check.Side) error {
	_, err := pfdn.ParseInfo([]byte(a.Stdout), []byte(a.Stderr))
	return err
}

func acceptEnabled(a check.Answer, _ *check.Side) error {
	info, err := pfdn.ParseInfo([]byte(a.Stdout), []byte(a.Stderr))
	if err == nil && !info.Enabled {
		err = errors.New("pf is not enabled after pfctl -E")
	}
	return err
}

// acceptReferences parses the listing and, when tokenVar is set, requires
// the token in it.
func acceptReferences(tokenVar string) func(a check.Answer, s *check.Side) error {
	return func(a check.Answer, s *check.Side) error {
		refs, _, err := pfdn.ParseReferences([]byte(a.Stdout), []byte(a.Stderr))
		if err != nil || tokenVar == "" {
			return err
		}
		if tok := s.Vars[tokenVar]; !(pfdn.Live{References: refs}).HoldsToken(tok) {
			return fmt.Errorf("token %s is not listed", tok)
		}
		return nil
	}
}

func acceptHook(a check.Answer, _ *check.Side) error {
	rules, err := pfdn.ParseRules([]byte(a.Stdout), []byte(a.Stderr))
	if err == nil && !(pfdn.Live{Main: rules}).Hooked(pfdn.DefaultAnchor) {
		err = fmt.Errorf("the main ruleset lacks %s: another tool loaded its own main ruleset; macake apply would refuse until it is back", pfdn.HookLine(pfdn.DefaultAnchor))
	}
	return err
}

// acceptAnchor parses an anchor's rules: whether it exists and, if so,
// that its one rule names pipe.
func acceptAnchor(exists bool, pipe int) func(a check.Answer, _ *check.Side) error {
	return func(a check.Answer, _ *check.Side) error {
		rules, err := pfdn.ParseRules([]byte(a.Stdout), []byte(a.Stderr))
		switch {
		case err != nil:
			return err
		case rules.Exists != exists:
			return fmt.Errorf("macake reads the anchor as existing: %v, want %v", rules.Exists, exists)
		case exists && (len(rules.Rules) != 1 || rules.Rules[0].Pipe != pipe):
			return fmt.Errorf("macake reads %d rules %q, want one naming pipe %d", len(rules.Rules), rules.Texts(), pipe)
		}
		return nil
	}
}

func acceptListed(a check.Answer, _ *check.Side) error {
	children, err := pfdn.ParseAnchors([]byte(a.Stdout), []byte(a.Stderr))
	if err == nil && !slices.Contains(children, ScratchAnchor) {
		err = fmt.Errorf("macake reads the children %q, without %s", children, ScratchAnchor)
	}
	return err
}

func acceptStderr(want string) func(a check.Answer, _ *check.Side) error {
	return func(a check.Answer, _ *check.Side) error {
		if got := noALTQ.Apply(a, nil).Stderr; got != want {
			return fmt.Errorf("stderr %q, want %q", got, want)
		}
		return nil
	}
}

// acceptPipe parses the listing and requires the pipe named by pipeVar
// with config want; alone requires that it is the only pipe listed (`pipe
// show N` lists pipe N only).
func acceptPipe(pipeVar string, want pfdn.PipeConfig, alone bool) func(a check.Answer, s *check.Side) error {
	return func(a check.Answer, s *check.Side) error {
		d, err := pfdn.ParseDummynet([]byte(a.Stdout))
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(s.Vars[pipeVar])
		p, ok := d.Pipe(n)
		switch {
		case !ok:
			return fmt.Errorf("pipe %d is not listed", n)
		case p.Config != want:
			return fmt.Errorf("macake reads pipe %d as %s, it sent %s", n, p.Config, want)
		case alone && len(d.Pipes) != 1:
			return fmt.Errorf("pipe show %d listed %d pipes", n, len(d.Pipes))
		}
		return nil
	}
}

func acceptPipeListed(pipeVar string) func(a check.Answer, s *check.Side) error {
	return func(a check.Answer, s *check.Side) error {
		d, err := pfdn.ParseDummynet([]byte(a.Stdout))
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(s.Vars[pipeVar])
		if _, ok := d.Pipe(n); !ok {
			return fmt.Errorf("pipe %d is gone", n)
		}
		return nil
	}
}

// acceptOrder requires the second scratch pipe (created later, same
// bucket) to be listed before the first.
func acceptOrder(a check.Answer, s *check.Side) error {
	d, err := pfdn.ParseDummynet([]byte(a.Stdout))
	if err != nil {
		return err
	}
	var order []string
	for _, p := range d.Pipes {
		if n := strconv.Itoa(p.Number); n == s.Vars["pipe"] || n == s.Vars["pipe2"] {
			order = append(order, n)
		}
	}
	if want := []string{s.Vars["pipe2"], s.Vars["pipe"]}; !slices.Equal(order, want) {
		return fmt.Errorf("listed pipes %v, want %v (newest first)", order, want)
	}
	return nil
}

// acceptFlows requires the parser to read the pipe with one flow queue.
func acceptFlows(a check.Answer, s *check.Side) error {
	d, err := pfdn.ParseDummynet([]byte(a.Stdout))
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(s.Vars["pipe"])
	p, ok := d.Pipe(n)
	switch {
	case !ok:
		return fmt.Errorf("pipe %d is not listed", n)
	case p.Flows != 1:
		return fmt.Errorf("pipe %d shows %d flow queues, want 1: the traffic did not reach it", n, p.Flows)
	}
	return nil
}
