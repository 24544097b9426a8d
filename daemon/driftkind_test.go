// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"net/netip"
	"testing"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// TestDriftKindFollowsWhatTheObjectDoes: the log names a repair by what
// the object does, whichever backend made the op: a deleted tc redirect
// is missing rules (traffic no longer reaches the shaper), as a flushed pf
// anchor is, not a missing shaper.
func TestDriftKindFollowsWhatTheObjectDoes(t *testing.T) {
	d := shape.State{Links: []shape.Link{{Name: "wan", Interface: "wan0", Slot: 0,
		Upload: shape.Pipe{RateBits: 10e6, QueueBytes: 65536}, Download: shape.Pipe{RateBits: 50e6, QueueBytes: 131072},
		Reflectors: []shape.Reflector{shape.ICMPReflector(netip.MustParseAddr("1.1.1.1"))}}}}
	tcOps := tc.Diff(d, tc.Live{Devices: map[string]*tc.DeviceState{"wan0": {Device: tc.Device{Name: "wan0", Index: 2, Up: true}}}, Caps: tc.Capabilities{HTB: true, BFIFO: true, Ingress: true, U32: true, Mirred: true, IFB: true}}).Ops
	seen := map[string]logging.DriftKind{}
	for _, op := range tcOps {
		seen[op.Kind] = driftKind(op)
	}
	for kind, want := range map[string]logging.DriftKind{
		"ingress": logging.DriftRulesMissing, "redirect": logging.DriftRulesMissing, "exemptions": logging.DriftRulesMissing,
		tc.KindShaper: logging.DriftShaperMissing,
	} {
		if got, ok := seen[kind]; !ok || got != want {
			t.Errorf("tc %s created: drift kind %q (in plan: %v), want %q", kind, got, ok, want)
		}
	}
	for _, tt := range []struct {
		op   plan.Op
		want logging.DriftKind
	}{
		{plan.Op{Kind: pfdn.KindPFReference, Role: plan.RoleEnable, Action: plan.Create}, logging.DriftPFDisabled},
		{plan.Op{Kind: pfdn.KindRules, Role: plan.RoleRules, Action: plan.Update}, logging.DriftRulesChanged},
		{plan.Op{Kind: pfdn.KindPipe, Action: plan.Update}, logging.DriftShaperChanged},
	} {
		if got := driftKind(tt.op); got != tt.want {
			t.Errorf("%s %s: %q, want %q", tt.op.Action, tt.op.Kind, got, tt.want)
		}
	}
}
