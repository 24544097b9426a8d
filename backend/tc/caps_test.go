// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/macake/macake/execrun"
)

const probeTCKey = "unshare --net tc -force -batch -"
const probeIFBKey = "unshare --net ip link add name mcprobe0 type ifb"

func probeWith(t *testing.T, tcRes, ifbRes execrun.Result) Capabilities {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("skipping: the probe only tries features on Linux")
	}
	r := &replayRunner{answers: map[string]execrun.Result{probeTCKey: tcRes, probeIFBKey: ifbRes}}
	return Probe(context.Background(), r, goldenTools)
}

func TestProbeKernelWithoutCake(t *testing.T) {
	// What this kernel answers: cake is unknown, everything else works.
	c := probeWith(t,
		execrun.Result{ExitCode: 1, Stderr: []byte("Error: Specified qdisc kind is unknown.\nCommand failed -:1\n")},
		execrun.Result{})
	if c.Cake || !c.HTB || !c.BFIFO || !c.Ingress || !c.U32 || !c.Mirred || !c.IFB || !c.Tried {
		t.Errorf("caps = %+v", c)
	}
	if c.Shaper() != "htb+bfifo" || !c.CanShapeDownload() {
		t.Errorf("shaper %q, download %v", c.Shaper(), c.CanShapeDownload())
	}
	report := strings.Join(c.Report(), "\n")
	for _, want := range []string{"sch_cake not available: falling back to htb+bfifo", "tc backend shapes both directions with htb+bfifo", "tried in a throwaway network namespace"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

func TestProbeIFBModuleAbsent(t *testing.T) {
	c := probeWith(t, execrun.Result{}, execrun.Result{ExitCode: 2, Stderr: []byte("Error: Unknown device type.\n")})
	if !c.Cake || c.IFB || c.CanShapeDownload() {
		t.Errorf("caps = %+v", c)
	}
	report := strings.Join(c.Report(), "\n")
	for _, want := range []string{"ifb not available: download cannot be shaped; load the module (modprobe ifb)", "shapes upload only, with cake"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

func TestProbeMirredMissingMeansNoDownload(t *testing.T) {
	c := probeWith(t, execrun.Result{ExitCode: 1, Stderr: []byte("Command failed -:1\nCommand failed -:7\n")}, execrun.Result{})
	if c.Mirred || !c.U32 || c.CanShapeDownload() {
		t.Errorf("caps = %+v", c)
	}
}

func TestProbeNotRootFallsBackToConfig(t *testing.T) {
	c := probeWith(t, execrun.Result{ExitCode: 1, Stderr: []byte("unshare: unshare failed: Operation not permitted\n")}, execrun.Result{})
	if c.Tried || strings.Contains(c.Method, "throwaway") {
		t.Errorf("a refused unshare was taken as a probe: %+v", c)
	}
}

func TestCapabilitiesFromKernelConfig(t *testing.T) {
	cfg, err := ParseKernelConfig(strings.NewReader("# comment\nCONFIG_NET_SCH_HTB=y\n# CONFIG_NET_SCH_CAKE is not set\nCONFIG_NET_SCH_FIFO=y\nCONFIG_NET_SCH_INGRESS=m\nCONFIG_NET_CLS_U32=y\nCONFIG_NET_ACT_MIRRED=m\nCONFIG_IFB=m\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := CapabilitiesFromConfig(cfg)
	if c.Cake || !c.HTB || !c.BFIFO || !c.Ingress || !c.U32 || !c.Mirred || !c.IFB {
		t.Errorf("caps = %+v", c)
	}
	if c := CapabilitiesFromConfig(map[string]string{}); c.Shaper() != "" || !strings.Contains(strings.Join(c.Report(), "\n"), "tc backend cannot shape on this kernel") {
		t.Errorf("an empty config must report that nothing can be shaped: %v", c.Report())
	}
}
