// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
)

const quick = "--duration=6s"

func TestSimSideBySideTable(t *testing.T) {
	code, out, errb := runCLI(t, "sim", "--link", "dsl", quick, "--controllers", "none,fixed,oracle-lag0.5")
	if code != exitcode.OK {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	for _, want := range []string{"dsl (built-in model, seed 1)", "download (mean capacity 50.0 Mbit/s", "upload (mean capacity 10.0 Mbit/s",
		"none", "fixed", "oracle-lag0.5", "score", "Drift-controlled off / on / off (oracle-lag0.5", "off again"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSimJSONAndSVG(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "run.svg")
	code, out, errb := runCLI(t, "sim", "--link", "lte", quick, "--controllers", "none,fixed", "--phases", "none", "--json", "--svg", svg, "--direction", "download")
	if code != exitcode.OK {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	var doc struct {
		Setup   string `json:"setup"`
		Results []struct {
			Controller string `json:"controller"`
			Download   struct {
				Loaded bool    `json:"loaded"`
				U      float64 `json:"u"`
				D50    float64 `json:"d50_ms"`
			} `json:"download"`
			Upload struct {
				Loaded bool `json:"loaded"`
			} `json:"upload"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(doc.Results) != 2 || doc.Results[0].Controller != "none" || !doc.Results[0].Download.Loaded || doc.Results[0].Upload.Loaded {
		t.Fatalf("results %+v", doc.Results)
	}
	if doc.Results[0].Download.D50 <= doc.Results[1].Download.D50 {
		t.Errorf("none D50 %.1f ms not above fixed's %.1f ms on LTE", doc.Results[0].Download.D50, doc.Results[1].Download.D50)
	}
	b, err := os.ReadFile(svg)
	if err != nil || !strings.HasPrefix(string(b), "<svg") || !strings.Contains(string(b), "fixed — download") {
		t.Fatalf("svg: %v %.80q", err, b)
	}
}

func TestSimTraceFile(t *testing.T) {
	code, out, errb := runCLI(t, "sim", "--trace", "../../sim/trace/testdata/step.down", "--duration=4s", "--warmup=1s", "--controllers", "none,fixed")
	if code != exitcode.OK {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	if !strings.Contains(out, "testdata/step.down (trace)") || !strings.Contains(out, "download (") || strings.Contains(out, "upload (") {
		t.Errorf("a download trace should load the download direction only:\n%s", out)
	}
}

func TestSimTraceDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []struct{ from, to string }{
		{"step.down", "mahimahi/step.down"},
		{"constant-50mbit.csv", "other/constant.csv"},
	} {
		src, err := os.ReadFile("../../sim/trace/testdata/" + f.from)
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dir, f.to)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		candidates string
		want, not  []string
	}{
		{"none", []string{"Trace benchmark: 2 traces from 2 sources × 2 seeds × 1 start offsets", "mahimahi/step.down", "Geometric-mean score", "controller    all  lost  call lost  mahimahi  other"},
			[]string{"Leave one source out", "held-out"}},
		{"ours", []string{"Candidates, geometric-mean score over upstream's per source", "Leave one source out",
			"Leave-one-source-out estimate vs upstream: geometric-mean score"}, []string{"development"}},
	} {
		code, out, errb := runCLI(t, "sim", "--traces", dir, "--duration=4s", "--warmup=1s", "--seeds=2", "--offsets=1", "--controllers", "none,fixed", "--candidates", tc.candidates)
		if code != exitcode.OK {
			t.Fatalf("--candidates %s: exit %d, stderr %q", tc.candidates, code, errb)
		}
		mustContain(t, "--candidates "+tc.candidates+": output", out, tc.want...)
		mustLack(t, "--candidates "+tc.candidates+": output", out, tc.not...)
	}
}

// TestSimPolicyBounds: a policy's autorate bounds reach the controller.
// examples/links.d/starlink.toml caps the download at 350 Mbit/s and starts
// it at 150; the trace-derived bounds would start at p25.
func TestSimPolicyBounds(t *testing.T) {
	rate := func(args ...string) float64 {
		t.Helper()
		code, out, errb := runCLI(t, append([]string{"sim", quick, "--controllers", "upstream", "--phases", "none", "--json"}, args...)...)
		if code != exitcode.OK {
			t.Fatalf("exit %d, stderr %q", code, errb)
		}
		var doc struct {
			Setup   string `json:"setup"`
			Results []struct {
				Download struct {
					MeanRate float64 `json:"mean_rate_mbit"`
				} `json:"download"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Results[0].Download.MeanRate
	}
	withPolicy := rate("--policy", "../../examples/links.d/starlink.toml")
	without := rate()
	if withPolicy < 100 || withPolicy > 170 || withPolicy == without {
		t.Errorf("mean download pipe rate %.1f Mbit/s with the policy (base 150), %.1f without; want the policy's bounds to steer it", withPolicy, without)
	}
	code, out, _ := runCLI(t, "sim", quick, "--controllers", "none", "--policy", "../../examples/links.d/starlink.toml")
	if code != exitcode.OK || !strings.Contains(out, "policy starlink (autorate, macake law)") {
		t.Errorf("exit %d, header lacks the policy:\n%s", code, out)
	}
}

// TestSimTraceErrorNamesThePath: a file that is no trace is named as given,
// leading slash and all.
func TestSimTraceErrorNamesThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errb := runCLI(t, "sim", "--trace", path, quick)
	if code != exitcode.Failure || !strings.Contains(errb, "macake sim: "+path+":1: ") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming %s:1", code, errb, path)
	}
}

// TestSimPolicyBuildsTheDaemonsController: --policy runs the controller
// macake watch builds from the file, every key of it: two policies that
// differ only in delay_threshold steer differently, balanced mode shapes
// only once it engages, fixed pins the pipe at the base rate and off
// installs nothing.
func TestSimPolicyBuildsTheDaemonsController(t *testing.T) {
	src, err := os.ReadFile("../../examples/links.d/starlink.toml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, from, to string) string {
		t.Helper()
		text := strings.Replace(string(src), from, to, 1)
		if text == string(src) && from != "" {
			t.Fatalf("%s: %q not in the example policy", name, from)
		}
		p := filepath.Join(dir, name+".toml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	type dirJSON struct {
		U           float64 `json:"u"`
		MeanRate    float64 `json:"mean_rate_mbit"`
		D95         float64 `json:"d95_ms"`
		RateChanges float64 `json:"rate_changes_per_min"`
	}
	policyArm := func(path string) dirJSON {
		t.Helper()
		code, out, errb := runCLI(t, "sim", "--duration=12s", "--direction", "download", "--controllers", "none", "--phases", "none", "--json", "--policy", path)
		if code != exitcode.OK {
			t.Fatalf("%s: exit %d, stderr %q", path, code, errb)
		}
		var doc struct {
			Results []struct {
				Controller string  `json:"controller"`
				Download   dirJSON `json:"download"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		for _, r := range doc.Results {
			if r.Controller == "policy" {
				return r.Download
			}
		}
		t.Fatalf("%s: no policy arm in %s", path, out)
		return dirJSON{}
	}
	at30 := policyArm(write("thr30", "", ""))
	at10 := policyArm(write("thr10", `delay_threshold = "30ms"`, `delay_threshold = "10ms"`))
	if at10 == at30 {
		t.Errorf("delay_threshold 10 ms and 30 ms gave identical results %+v; the policy's threshold does not reach the controller", at10)
	}
	balanced := policyArm(write("bal", `mode = "autorate"`, `mode = "balanced"`))
	if balanced.RateChanges == 0 || balanced.MeanRate <= 0 || balanced.MeanRate >= at30.MeanRate {
		t.Errorf("balanced: %+v (autorate %+v); want it to engage after a standing queue, unshaped (rate 0) before", balanced, at30)
	}
	fixed := policyArm(write("fixed", `mode = "autorate"`, `mode = "fixed"`))
	if fixed.MeanRate < 149 || fixed.MeanRate > 150.1 {
		t.Errorf("fixed: mean pipe rate %.1f Mbit/s; want the policy's 150 Mbit/s, unchanged", fixed.MeanRate)
	}
	off := policyArm(write("off", `mode = "autorate"`, `mode = "off"`))
	if off.MeanRate != 0 || off.RateChanges != 0 {
		t.Errorf("off: %+v; want no pipe at all", off)
	}
}

func TestSimBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--link", "wifi", quick}, exitcode.Usage, "--link wifi: unknown link model \"wifi\""},
		{[]string{"--link", "dsl", "--trace", "x"}, exitcode.Usage, "one of --link, --trace and --traces"},
		{[]string{"--controllers", "magic", quick}, exitcode.Usage, "unknown controller \"magic\""},
		{[]string{"--queue", "2MB", quick}, exitcode.Usage, "above dnctl's limit"},
		{[]string{"--cc", "bbr", quick}, exitcode.Usage, "unknown congestion control"},
		{[]string{"--duration", "1s"}, exitcode.Usage, "longer than the warm-up"},
		{[]string{"--trace", "/no/such/file", quick}, exitcode.Failure, "no such file"},
		{[]string{"--loss", "0.5", quick}, exitcode.Usage, "want DOWN,UP"},
		{[]string{"--loss", "2,0", quick}, exitcode.Usage, "not a probability"},
		{[]string{"--offset", "-5s", quick}, exitcode.Usage, "-offset: duration \"-5s\" must not be negative"},
		{[]string{"--warmup", "-1s", quick}, exitcode.Usage, "-warmup: duration \"-1s\" must not be negative"},
		{[]string{"--flows", "0", quick}, exitcode.Usage, "--flows 0: want 1–256"},
		{[]string{"--buffer", "-1s", quick}, exitcode.Usage, "-buffer: duration \"-1s\" must not be negative"},
		{[]string{"--buffer", "1ns", quick}, exitcode.Usage, "--buffer 1ns"},
		{[]string{"--actuation-delay", "-5ms", quick}, exitcode.Usage, "-actuation-delay: duration \"-5ms\" must not be negative"},
		{[]string{"--base-rtt", "-10ms", quick}, exitcode.Usage, "-base-rtt: duration \"-10ms\" must not be negative"},
		{[]string{"--duration", "2001ms"}, exitcode.Usage, "measures only 1ms"},
		{[]string{"--trace", "../../sim/trace/testdata/step.down", "--rebin", "1h", quick}, exitcode.Usage, "--rebin 1h0m0s"},
		{[]string{"--controllers", "none,policy", quick}, exitcode.Usage, "needs --policy"},
		{[]string{"--policy", "x.toml", quick}, exitcode.Config, "x.toml"},
		{[]string{"--policy", "../../examples/links.d/starlink.toml", "--traces", "."}, exitcode.Usage, "every trace takes its own"},
		{[]string{"--phases", "ours", "--controllers", "none", quick}, exitcode.Usage, "not among the controllers"},
		{[]string{"extra"}, exitcode.Usage, "unexpected argument"},
	} {
		code, _, errb := runCLI(t, append([]string{"sim"}, tc.args...)...)
		if code != tc.code || !strings.Contains(errb, tc.want) {
			t.Errorf("sim %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errb, tc.code, tc.want)
		}
	}
}
