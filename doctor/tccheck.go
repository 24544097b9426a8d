// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/internal/english"
)

// tcFacts is whether tc and ip run, and what the kernel supports.
type tcFacts struct {
	tc, ip toolState
	caps   tc.Capabilities
	probed bool
}

func (in *Inspection) tcFacts(ctx context.Context) tcFacts {
	return in.tcOnce.get(func() tcFacts {
		t := tc.DefaultTools()
		f := tcFacts{
			tc: runTool(ctx, in.sys.Runner, "tc", "MACAKE_TC", t.TC, "-V"),
			ip: runTool(ctx, in.sys.Runner, "ip", "MACAKE_IP", t.IP, "-V"),
		}
		if in.sys.TCCapabilities != nil {
			f.caps, f.probed = in.sys.TCCapabilities(ctx), true
		}
		return f
	})
}

func checkTCTools(ctx context.Context, in *Inspection) report.Result {
	f := in.tcFacts(ctx)
	for _, t := range []toolState{f.tc, f.ip} {
		if r := toolResult(t, "install iproute2 (apt install iproute2, dnf install iproute-tc)"); r.Status != report.OK {
			return r
		}
	}
	return ok("%s and %s run", f.tc.argv[0], f.ip.argv[0])
}

func checkTCKernel(ctx context.Context, in *Inspection) report.Result {
	f := in.tcFacts(ctx)
	if !f.probed {
		return skipped("the kernel's qdiscs cannot be probed here")
	}
	return judgeTCKernel(f.caps, in.cakeOptionsUsed())
}

// cakeOptionsUsed lists the policies that set [cake] options.
func (in *Inspection) cakeOptionsUsed() []string {
	var names []string
	for _, l := range in.config().policies.Links {
		if !l.Cake.IsZero() {
			names = append(names, l.Name)
		}
	}
	return names
}

// judgeTCKernel reports the kernel's qdiscs and what is missing. Without
// sch_cake macake shapes with htb+bfifo, exactly like a dummynet pipe: that
// is fine unless a policy asks for CAKE-only options.
func judgeTCKernel(c tc.Capabilities, cakePolicies []string) report.Result {
	details := c.Report()
	shaper := c.Shaper()
	switch {
	case shaper == "":
		return problem("load or build the qdiscs (modprobe sch_htb; CONFIG_NET_SCH_HTB, CONFIG_NET_SCH_FIFO)",
			"this kernel has neither sch_cake nor htb+bfifo, so macake cannot shape").With(details...)
	case !c.CanShapeDownload():
		return warn("modprobe ifb act_mirred cls_u32 sch_ingress (or a kernel with CONFIG_IFB, CONFIG_NET_ACT_MIRRED, CONFIG_NET_CLS_U32, CONFIG_NET_SCH_INGRESS)",
			"macake can shape upload only (with %s): download shaping needs ingress, u32, mirred and ifb", shaper).With(details...)
	case !c.ShapesWithCake() && len(cakePolicies) > 0:
		return warn("load sch_cake (modprobe sch_cake) or a kernel with CONFIG_NET_SCH_CAKE; otherwise the [cake] options are not applied",
			"sch_cake is not available, so the [cake] options of %s are not applied (shaping with htb+bfifo)", english.Join(cakePolicies, 4)).With(details...)
	}
	if !c.ShapesWithCake() {
		return ok("sch_cake not available: falling back to htb+bfifo, which shapes both directions like a dummynet pipe (kernel features %s)", c.Method).With(details...)
	}
	return ok("both directions shape with cake (kernel features %s)", c.Method).With(details...)
}
