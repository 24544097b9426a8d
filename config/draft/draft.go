// SPDX-License-Identifier: Apache-2.0

package draft

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/internal/docsite"

	"github.com/macake/macake/shape"
)

// Draft is a first policy for a network, as `macake init` detects it:
// what to match it by and the rates to start from. Render writes it as a
// commented policy file whose every default comes from Defaults.
type Draft struct {
	// Name is the link's name (the file stem).
	Name string
	// Interface is the interface to shape; GatewayIP, GatewayMAC and SSID
	// what is known of the network on it (zero when unknown).
	Interface  string
	GatewayIP  netip.Addr
	GatewayMAC config.HardwareAddr
	SSID       string
	// Priority is match.priority: higher wins where several policies
	// match; 0, the default, is left commented out.
	Priority int
	// Mode is the shaper mode; "" is the default.
	Mode config.Mode
	// Download and Upload are the base rates; 0 writes "auto" (95 % of
	// what `macake measure` measures on this network).
	Download, Upload units.Rate
	// Measured, when set, says the rates came from a measurement of these
	// capacities, made at When.
	Measured *Measured
	// Written is when the draft was made, for the file's first line.
	Written time.Time
}

// Measured is a capacity measurement a draft's rates come from.
type Measured struct {
	Download, Upload units.Rate
	When             time.Time
}

// NameFor suggests a link name for a network: its SSID, else the
// interface, turned into a valid name ("My iPhone" -> "my-iphone"); "" when
// neither gives one.
func NameFor(ssid, iface string) string {
	for _, s := range []string{ssid, iface} {
		var b strings.Builder
		for _, r := range strings.ToLower(s) {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
				b.WriteRune(r)
			case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
				b.WriteByte('-')
			}
		}
		name := strings.Trim(b.String(), "-_")
		if len(name) > 32 {
			name = strings.TrimRight(name[:32], "-_")
		}
		if config.ValidLinkName(name) {
			return name
		}
	}
	return ""
}

// CheckName checks a link name given to init, saying which valid name it
// probably meant ("Bad_Name" is "bad_name").
func CheckName(name string) error {
	if config.ValidLinkName(name) {
		return nil
	}
	err := fmt.Sprintf("link name %q: want 1-32 of a-z, 0-9, _ and -, starting with a letter or digit", name)
	if s := NameFor(name, ""); s != "" {
		err += fmt.Sprintf(", such as %q", s)
	}
	return errors.New(err)
}

// Render writes the draft as a policy file: the detected match keys and
// the rates set, every other key commented out with its default (from
// Defaults) and what it does. What it writes parses back (Parse) to the
// draft's policy; a draft that would not is an error.
func (d Draft) Render() ([]byte, error) {
	if err := CheckName(d.Name); err != nil {
		return nil, err
	}
	if err := shape.CheckInterfaceName(d.Interface); err != nil {
		return nil, fmt.Errorf("interface: %w", err)
	}
	mode := d.Mode
	if mode == "" {
		mode = config.Defaults.Shaper.Mode
	}
	def := config.Defaults
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	q := strconv.Quote

	b.WriteString(commentLines(fmt.Sprintf("Policy for link %q, written by `macake init` on %s for the network it found: %s. A commented key shows its default; every key is explained at "+docsite.Page("CONFIG.md", "")+".",
		d.Name, d.Written.Format(time.DateOnly), d.network())))
	b.WriteString("\n")
	w("description = %s\n\n", q(d.description()))

	w("[match]\n")
	w("interface   = %s\n", q(d.Interface))
	if len(d.GatewayMAC) > 0 {
		w("gateway_mac = %s    # the gateway's MAC: the stable key for this network\n", q(d.GatewayMAC.String()))
	}
	if d.SSID != "" {
		w("ssid        = %s\n", q(d.SSID))
	}
	switch {
	case d.GatewayIP.IsValid() && len(d.GatewayMAC) == 0:
		w("gateway_ip  = %s    # no gateway MAC was found, so the IP tells this network apart\n", q(d.GatewayIP.String()))
	case d.GatewayIP.IsValid():
		w("# gateway_ip = %s  # DHCP may hand out another; the MAC above stays\n", q(d.GatewayIP.String()))
	}
	if d.Priority != def.Match.Priority {
		w("priority    = %d    # higher wins when several policies match\n\n", d.Priority)
	} else {
		w("# priority  = %d              # higher wins when several policies match\n\n", def.Match.Priority)
	}

	w("[shaper]\n")
	w("mode     = %s   # autorate | balanced | fixed | off\n", q(string(mode)))
	if m := d.Measured; m != nil {
		b.WriteString(commentLines(fmt.Sprintf("Measured on %s: %s down, %s up; the rates are 95 %% of that.",
			m.When.Format(time.DateOnly), shape.FormatApprox(float64(m.Download)), shape.FormatApprox(float64(m.Upload)))))
	}
	note := "   # 95 % of what `macake measure` measures on this network"
	rate := func(key string, r units.Rate) {
		if r > 0 {
			w("%-8s = %s\n", key, q(r.String()))
			return
		}
		w("%-8s = \"auto\"%s\n", key, note)
		note = ""
	}
	rate("download", d.Download)
	rate("upload", d.Upload)
	w("# queue    = %s   # the pipe's queue, resized with every rate change; or a size such as \"256KB\"\n", q(def.Shaper.Queue.String()))
	w("# overhead = %d        # bytes of framing per packet (0-256), or CAKE's keyword, e.g. 18 or \"docsis\"\n", def.Shaper.Overhead.Bytes)
	w("# mpu      = %d        # smallest packet on the wire, e.g. 64\n", def.Shaper.MPU)

	if mode == config.ModeAutorate || mode == config.ModeBalanced {
		a := def.Autorate
		w("\n# [autorate]           # the controller; defaults follow cake-autorate\n")
		if d.Download > 0 && d.Upload > 0 {
			if lo, hi, err := d.bounds(shape.Download); err == nil {
				w("# download = { min = %s, max = %s }   # derived from the base rate\n", q(lo.String()), q(hi.String()))
			}
			if lo, hi, err := d.bounds(shape.Upload); err == nil {
				w("# upload   = { min = %s, max = %s }\n", q(lo.String()), q(hi.String()))
			}
		}
		w("# reflectors = [%s, …]   # %d public resolvers by default\n", q(a.Reflectors[0].String()), len(a.Reflectors))
		w("# active_reflectors = %d\n", a.ActiveReflectors)
		w("# probe_interval  = %s\n", q(a.ProbeInterval.String()))
		w("# delay_threshold = %s   # one-way delay above the baseline that counts as bufferbloat\n", q(a.DelayThreshold.String()))
	}
	if mode == config.ModeBalanced {
		w("\n[balanced]\n")
		w("# engage_after  = %s    # a standing queue this long engages the shaper\n", q(def.Balanced.EngageAfter.String()))
		w("# release_after = %s   # clean latency this long releases it\n", q(def.Balanced.ReleaseAfter.String()))
	}
	out := []byte(b.String())
	if _, _, err := config.Parse(d.Name+".toml", out, config.LoadOptions{}); err != nil {
		return nil, fmt.Errorf("the drafted policy does not parse (a bug): %w", err)
	}
	return out, nil
}

// commentLines wraps text into TOML comment lines of at most 76 columns.
func commentLines(text string) string {
	var b strings.Builder
	line := "#"
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > 76 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + word
	}
	b.WriteString(line + "\n")
	return b.String()
}

// bounds are the controller's floor and ceiling the draft's base rate
// gives one direction when the policy sets none.
func (d Draft) bounds(dir shape.Direction) (lo, hi units.Rate, err error) {
	l := config.Link{Name: d.Name, Policy: config.DefaultPolicy()}
	l.Shaper.Mode = config.ModeAutorate
	l.Shaper.Download.Rate, l.Shaper.Upload.Rate = d.Download, d.Upload
	lo, _, hi, err = l.Rates(dir, 0, 0, 0)
	return lo, hi, err
}

// network describes what was detected, for the file's header.
func (d Draft) network() string {
	parts := []string{d.Interface}
	if gw := config.DescribeGateway(config.AddrText(d.GatewayIP), d.GatewayMAC.String()); gw != "" {
		parts = append(parts, gw)
	}
	if d.SSID != "" {
		parts = append(parts, "Wi-Fi "+strconv.Quote(d.SSID))
	}
	return strings.Join(parts, ", ")
}

func (d Draft) description() string {
	if d.SSID != "" {
		return fmt.Sprintf("%s on Wi-Fi %q", d.Interface, d.SSID)
	}
	if d.GatewayIP.IsValid() {
		return fmt.Sprintf("%s via %s", d.Interface, d.GatewayIP)
	}
	return d.Interface
}

// ErrPolicyExists is returned by WriteNewPolicy when the file is there.
var ErrPolicyExists = errors.New("policy file exists")

// ConflictError is a new policy that another one in the directory cannot
// be told apart from: the same network and the same priority, which would
// make every apply refuse.
type ConflictError struct {
	// Name is the new link's; Other and OtherFile the policy it clashes with.
	Name, Other, OtherFile string
	// Priority is the priority they share.
	Priority int
}

// Error says what clashes and both ways out, with nothing written.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("link %q would match the same network as %q (%s) at the same priority (%d), so neither could be applied; nothing written. "+
		"To prefer %q on this network, give it a higher priority (--priority %d); or edit %s",
		e.Name, e.Other, e.OtherFile, e.Priority, e.Name, e.Priority+1, e.OtherFile)
}

// WriteNewPolicy writes text, the policy of link name, as dir/NAME.toml,
// creating dir (0755) when missing, and never replaces a file that exists
// (ErrPolicyExists). The file is 0644: policies are not secret, and only
// root may write them. The new file must leave the directory valid: a
// policy that another cannot be told apart from (the same network, the
// same priority) would make every apply refuse, so it is not written (a
// *ConflictError). Problems of other files are theirs, and do not stop it.
func WriteNewPolicy(dir, name string, text []byte) (string, error) {
	path := filepath.Join(dir, name+".toml")
	if _, err := os.Lstat(path); err == nil {
		return path, existsError(path)
	}
	mine, _, err := config.Parse(path, text, config.LoadOptions{})
	if err != nil {
		return path, fmt.Errorf("the drafted policy does not parse (a bug): %w", err)
	}
	others, _, _ := config.Load(dir, config.LoadOptions{SkipOwnershipCheck: true})
	for _, o := range others {
		if config.Indistinguishable(mine.Match, o.Match) {
			return path, &ConflictError{Name: name, Other: o.Name, OtherFile: o.File, Priority: mine.Match.Priority}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return path, existsError(path)
	}
	if err != nil {
		return path, err
	}
	if _, err := f.Write(text); err != nil {
		f.Close()
		os.Remove(path)
		return path, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return path, fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

func existsError(path string) error {
	return fmt.Errorf("%s: %w; macake init never overwrites a policy (edit it, or name another link)", path, ErrPolicyExists)
}
