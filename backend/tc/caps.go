// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"bufio"
	"compress/gzip"
	"context"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/lazyregexp"
)

// Capabilities says which of the kernel pieces the backend uses exist.
type Capabilities struct {
	// Cake is sch_cake and Prio sch_prio: CAKE shapes under a prio root
	// whose other band lets the probes bypass it. Without both the
	// shaper is htb + bfifo.
	Cake, Prio bool
	// HTB and BFIFO are the fallback shaper (sch_htb, sch_fifo).
	HTB, BFIFO bool
	// Ingress, U32, Mirred and IFB are what download shaping needs: the
	// ingress hook, a match-all classifier, the redirect action and the
	// IFB device that gives ingress traffic a queue.
	Ingress, U32, Mirred, IFB bool
	// Method says how the answers were found, for doctor.
	Method string
	// Tried is true when every answer comes from actually trying it in a
	// throwaway network namespace; false when read from the kernel's
	// configuration (or assumed).
	Tried bool
}

// ShapesWithCake reports whether the backend shapes with CAKE: sch_cake
// and the sch_prio it hangs from are both there.
func (c Capabilities) ShapesWithCake() bool { return c.Cake && c.Prio }

// Shaper returns the qdisc the backend will use: "cake", "htb+bfifo", or
// "" when neither is available.
func (c Capabilities) Shaper() string {
	switch {
	case c.ShapesWithCake():
		return "cake"
	case c.HTB && c.BFIFO:
		return "htb+bfifo"
	}
	return ""
}

// CanShapeDownload reports whether ingress shaping through an IFB works.
func (c Capabilities) CanShapeDownload() bool {
	return c.Ingress && c.U32 && c.Mirred && c.IFB
}

// Report returns human lines for `macake doctor`, one per finding.
func (c Capabilities) Report() []string {
	lines := []string{"tc backend: kernel features " + c.Method}
	have := func(ok bool, name, yes, no string) {
		if ok {
			lines = append(lines, name+" available"+yes)
		} else {
			lines = append(lines, name+" not available: "+no)
		}
	}
	fallback := "falling back to htb+bfifo (a rate and one byte-limited queue per direction, as on macOS; the [cake] options are not applied)"
	if !c.HTB || !c.BFIFO {
		fallback = "and htb+bfifo is missing too, so nothing can be shaped"
	}
	switch {
	case c.ShapesWithCake():
		lines = append(lines, "sch_cake available: shaping with CAKE", "sch_prio available: the probes bypass CAKE through its first band")
	case c.Cake:
		lines = append(lines, "sch_cake available", "sch_prio not available: CAKE is not used, since nothing would let the probes bypass it (CONFIG_NET_SCH_PRIO); "+fallback)
	default:
		lines = append(lines, "sch_cake not available: "+fallback)
	}
	have(c.HTB, "sch_htb", "", "the htb fallback shaper is missing (CONFIG_NET_SCH_HTB)")
	have(c.BFIFO, "sch_fifo (bfifo)", "", "the byte-limited queue of the fallback is missing (CONFIG_NET_SCH_FIFO)")
	have(c.Ingress, "sch_ingress", "", "download cannot be shaped (CONFIG_NET_SCH_INGRESS)")
	have(c.U32, "cls_u32", "", "download cannot be redirected and probes cannot be exempted (CONFIG_NET_CLS_U32)")
	have(c.Mirred, "act_mirred", "", "download cannot be redirected to an IFB (CONFIG_NET_ACT_MIRRED)")
	have(c.IFB, "ifb", "", "download cannot be shaped; load the module (modprobe ifb) or build the kernel with CONFIG_IFB")
	switch s := c.Shaper(); {
	case s == "":
		lines = append(lines, "tc backend cannot shape on this kernel")
	case !c.CanShapeDownload():
		lines = append(lines, "tc backend shapes upload only, with "+s)
	default:
		lines = append(lines, "tc backend shapes both directions with "+s)
	}
	return lines
}

// probeBatch is fed to `unshare --net tc -force -batch -`: each line tries
// one feature on the loopback device of a brand-new network namespace,
// which disappears with the process. Line numbers matter: tc reports a
// failure as "Command failed -:N".
const probeBatch = `qdisc add dev lo root handle 1: cake bandwidth 1mbit
qdisc replace dev lo root handle 2: htb default 1
class add dev lo parent 2: classid 2:1 htb rate 1mbit
qdisc replace dev lo root handle 3: bfifo limit 10000
qdisc add dev lo handle ffff: ingress
filter add dev lo ingress protocol ip pref 1 u32 match u32 0 0 flowid ffff:1
filter add dev lo ingress protocol all pref 2 u32 match u32 0 0 action mirred egress redirect dev lo
qdisc replace dev lo root handle 4: prio bands 2 priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1
`

var batchFailRE = lazyregexp.New(`Command failed [^:\s]*:(\d+)`)

// Probe finds out what the kernel supports. As root it tries each feature
// in a throwaway network namespace (unshare --net), which is definitive and
// leaves nothing behind; otherwise it reads the kernel configuration.
func Probe(ctx context.Context, r execrun.Runner, t Tools) Capabilities {
	if c, ok := probeByTrying(ctx, r, t); ok {
		return c
	}
	return probeFromConfig()
}

func probeByTrying(ctx context.Context, r execrun.Runner, t Tools) (Capabilities, bool) {
	if runtime.GOOS != "linux" {
		return Capabilities{}, false
	}
	res, err := r.Run(ctx, execrun.Command{Argv: []string{t.Unshare, "--net", t.TC, "-force", "-batch", "-"}, Stdin: probeBatch})
	if err != nil {
		return Capabilities{}, false
	}
	failed, ok := probeFailures(res)
	if !ok {
		return Capabilities{}, false
	}
	c := Capabilities{Method: "tried in a throwaway network namespace", Tried: true}
	c.Cake = !failed[1]
	c.HTB = !failed[2] && !failed[3]
	c.BFIFO = !failed[4]
	c.Ingress = !failed[5]
	c.U32 = c.Ingress && !failed[6]
	c.Mirred = c.U32 && !failed[7]
	c.Prio = !failed[8]
	res, err = r.Run(ctx, execrun.Command{Argv: []string{t.Unshare, "--net", t.IP, "link", "add", "name", "mcprobe0", "type", "ifb"}})
	if err != nil {
		return Capabilities{}, false
	}
	c.IFB = res.ExitCode == 0
	return c, true
}

// probeFailures maps a probe batch's result to the failed line numbers. ok
// is false when the batch did not run at all (unshare refused: not root).
func probeFailures(res execrun.Result) (failed map[int]bool, ok bool) {
	failed = map[int]bool{}
	for _, m := range batchFailRE.FindAllStringSubmatch(string(res.Stderr), -1) {
		n, _ := strconv.Atoi(m[1])
		failed[n] = true
	}
	if res.ExitCode != 0 && len(failed) == 0 {
		return nil, false
	}
	return failed, true
}

// kernelSymbols maps each capability to its Kconfig symbol and module.
var kernelSymbols = []struct {
	symbol, module string
	set            func(*Capabilities, bool)
}{
	{"CONFIG_NET_SCH_CAKE", "sch_cake", func(c *Capabilities, v bool) { c.Cake = v }},
	{"CONFIG_NET_SCH_PRIO", "sch_prio", func(c *Capabilities, v bool) { c.Prio = v }},
	{"CONFIG_NET_SCH_HTB", "sch_htb", func(c *Capabilities, v bool) { c.HTB = v }},
	{"CONFIG_NET_SCH_FIFO", "", func(c *Capabilities, v bool) { c.BFIFO = v }},
	{"CONFIG_NET_SCH_INGRESS", "sch_ingress", func(c *Capabilities, v bool) { c.Ingress = v }},
	{"CONFIG_NET_CLS_U32", "cls_u32", func(c *Capabilities, v bool) { c.U32 = v }},
	{"CONFIG_NET_ACT_MIRRED", "act_mirred", func(c *Capabilities, v bool) { c.Mirred = v }},
	{"CONFIG_IFB", "ifb", func(c *Capabilities, v bool) { c.IFB = v }},
}

// probeFromConfig reads /proc/config.gz or /boot/config-RELEASE; failing
// both, loaded modules in /sys/module; failing that, it assumes what every
// mainstream distribution kernel has (all but cake).
func probeFromConfig() Capabilities {
	if runtime.GOOS != "linux" {
		return Capabilities{Method: "unavailable: the tc backend needs Linux"}
	}
	if c, ok := ConfigCapabilities(); ok {
		return c
	}
	c := Capabilities{Prio: true, HTB: true, BFIFO: true, Ingress: true, U32: true, Mirred: true, IFB: true}
	c.Method = "assumed (no kernel configuration readable; trying takes root with CAP_SYS_ADMIN)"
	for _, s := range kernelSymbols {
		if s.module == "" {
			continue
		}
		if _, err := os.Stat("/sys/module/" + s.module); err == nil {
			s.set(&c, true)
		}
	}
	return c
}

// ConfigCapabilities reads the capabilities from the kernel configuration
// (/proc/config.gz, else /boot/config-RELEASE), as the backend does
// without root; ok is false when neither can be read. `macake selftest`
// compares it with what trying the features finds.
func ConfigCapabilities() (c Capabilities, ok bool) {
	release := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		release = strings.TrimSpace(string(b))
	}
	for _, path := range []string{"/proc/config.gz", "/boot/config-" + release} {
		cfg, err := readKernelConfig(path)
		if err != nil {
			continue
		}
		c := CapabilitiesFromConfig(cfg)
		c.Method = "read from " + path + " (not tried: trying takes root with CAP_SYS_ADMIN, which the systemd unit does not keep)"
		return c, true
	}
	return Capabilities{}, false
}

func readKernelConfig(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, err
		}
		defer gz.Close()
		r = gz
	}
	return ParseKernelConfig(r)
}

// ParseKernelConfig reads a kernel .config ("CONFIG_X=y", "# CONFIG_Y is
// not set") into symbol → value.
func ParseKernelConfig(r io.Reader) (map[string]string, error) {
	cfg := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(r, 16<<20))
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "CONFIG_") {
			cfg[k] = v
		}
	}
	return cfg, sc.Err()
}

// CapabilitiesFromConfig maps a kernel configuration to capabilities: a
// feature built in (y) or as a module (m) counts as available.
func CapabilitiesFromConfig(cfg map[string]string) Capabilities {
	var c Capabilities
	for _, s := range kernelSymbols {
		v := cfg[s.symbol]
		s.set(&c, v == "y" || v == "m")
	}
	return c
}
