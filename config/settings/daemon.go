// SPDX-License-Identifier: Apache-2.0

// Package settings reads macake.toml, the daemon's own settings file
// beside the policy directory (the state directory, pf's anchor and pipe
// numbers, the log, the metrics and status page endpoints, the operator
// group, the MQTT publisher), as strictly as config reads a policy and
// with its problems placed the same way (config.DecodeStrict); and
// Policies, the policy files with those settings, which is what one pass
// reads.
package settings

import (
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/macake/macake/config"
	"github.com/macake/macake/internal/fileowner"
	"github.com/macake/macake/internal/lazyregexp"
	"github.com/macake/macake/shape"
)

// DaemonFile is where the optional daemon settings live.
const DaemonFile = "/etc/macake/macake.toml"

// Daemon holds the daemon settings (DaemonFile). Every key is optional;
// DaemonDefaults has the defaults.
type Daemon struct {
	// StateDir holds state.json (absolute path).
	StateDir string `toml:"state_dir"`
	// Anchor is the pf anchor macake owns. The stock /etc/pf.conf evaluates
	// "com.apple/*" dummynet anchors, hence the default com.apple/macake.
	Anchor string `toml:"anchor"`
	// PipeRange is the block of dummynet pipe numbers macake owns.
	PipeRange PipeRange `toml:"pipe_range"`
	// LogFormat is "text" or "json".
	LogFormat LogFormat `toml:"log_format"`
	// LogFile is an absolute path, or "" for standard error.
	LogFile string `toml:"log_file"`
	// MetricsListen is a loopback host:port for the Prometheus endpoint,
	// or "" for none.
	MetricsListen string `toml:"metrics_listen"`
	// StatusPageListen is a loopback host:port where watch serves its
	// live status page, or "" for none.
	StatusPageListen string `toml:"status_page_listen"`
	// StatusPageControl puts the pause and resume buttons on the status
	// page; false serves it read-only.
	StatusPageControl bool `toml:"status_page_control"`
	// OperatorGroup is the group whose members may pause and resume the
	// shaping of a running watch without sudo (and read its status), or
	// NoOperatorGroup; DefaultOperatorGroupFor says which by default.
	OperatorGroup string `toml:"operator_group"`
	// MQTT publishes every link's state to an MQTT broker, for Home
	// Assistant and the like; off unless it names a broker.
	MQTT MQTT `toml:"mqtt"`
}

// NoOperatorGroup is the operator_group that names no group: only root
// may pause and resume.
const NoOperatorGroup = "none"

// groupRE is what a group name may be: the POSIX portable characters
// shadow's groupadd and macOS's dscl accept, at most 32 of them.
var groupRE = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_.-]{0,30}\$?$`)

// StateDirFor is the state directory a command uses when the command line
// gives flag: the flag, unless it is left at the default and the settings
// name a state_dir, which then wins. Every command that reads or writes the
// state file asks this, so that they all find the same one.
func (d Daemon) StateDirFor(flag string, isDefault bool) string {
	if isDefault && d.StateDir != "" {
		return d.StateDir
	}
	return flag
}

// PipeRange is an inclusive block of dummynet pipe numbers.
type PipeRange struct {
	First int `toml:"first"`
	Last  int `toml:"last"`
}

// Len returns how many pipe numbers the range holds.
func (r PipeRange) Len() int { return r.Last - r.First + 1 }

// Contains reports whether pipe n is in the range.
func (r PipeRange) Contains(n int) bool { return n >= r.First && n <= r.Last }

// LogFormat is how the daemon writes its log.
type LogFormat string

// The log formats.
const (
	LogText LogFormat = "text"
	LogJSON LogFormat = "json"
)

// UnmarshalText implements encoding.TextUnmarshaler.
func (f *LogFormat) UnmarshalText(b []byte) error {
	return config.ParseEnum("log format", b, []LogFormat{LogText, LogJSON}, f)
}

// nlcPipes are the pipes Apple's Network Link Conditioner uses; a range
// that includes them would make macake treat NLC's pipes as its own.
var nlcPipes = PipeRange{First: 40269, Last: 40270}

// LoadDaemon reads the daemon settings at path. A missing file gives
// DaemonDefaults and no error. Problems are reported like config.Load's, and the
// same ownership checks apply unless opts turn them off.
func LoadDaemon(path string, opts config.LoadOptions) (Daemon, []config.Warning, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return DaemonDefaults, nil, nil
	}
	data, err := config.ReadFile(path, opts)
	if err != nil {
		return DaemonDefaults, nil, err
	}
	return parseDaemon(path, data, &opts)
}

// ParseDaemon decodes and validates daemon settings; name prefixes every
// problem. It looks at nothing on disk: LoadDaemon also checks the paths
// the settings name.
func ParseDaemon(name string, data []byte) (Daemon, []config.Warning, error) {
	return parseDaemon(name, data, nil)
}

// examples show a valid value of the settings' own types in type errors.
var examples = map[reflect.Type]string{
	reflect.TypeFor[LogFormat](): `"text"`,
	reflect.TypeFor[PipeRange](): `{ first = 48001, last = 48998 }`,
}

// parseDaemon is ParseDaemon, and with paths LoadDaemon's checks of the
// paths on disk (checkDaemonPaths).
func parseDaemon(name string, data []byte, paths *config.LoadOptions) (Daemon, []config.Warning, error) {
	s := DaemonDefaults
	warnings, err := config.DecodeStrict(name, data, &s, examples, func(c config.Checker) {
		validateDaemon(c, &s)
		if paths != nil {
			checkDaemonPaths(c, &s, !paths.SkipOwnershipCheck)
		}
	})
	if err != nil {
		return DaemonDefaults, warnings, err
	}
	return s, warnings, nil
}

// validateDaemon checks the settings' values and how they relate.
func validateDaemon(d config.Checker, s *Daemon) {
	if d.Given("state_dir") && !filepath.IsAbs(s.StateDir) {
		d.Bad("state_dir", "%q must be an absolute path", s.StateDir)
	}
	if d.Given("log_file") && s.LogFile != "" && !filepath.IsAbs(s.LogFile) {
		d.Bad("log_file", "%q must be an absolute path (or leave it out to log to standard error)", s.LogFile)
	}
	switch a := s.Anchor; {
	case shape.CheckAnchorName(a) != nil:
		d.Bad("anchor", "%q is not an anchor name macake can own: %v", a, shape.CheckAnchorName(a))
	case a == "com.apple" || !strings.HasPrefix(a, "com.apple/"):
		d.Warn("anchor", "anchor %q is not under com.apple/: the stock /etc/pf.conf does not evaluate it, so pf needs its own dummynet-anchor line for it", a)
	}
	r := s.PipeRange
	switch {
	case r.First < 1 || r.Last > 65535 || r.First > r.Last:
		d.Bad("pipe_range", "%d..%d must lie within 1..65535 with first <= last", r.First, r.Last)
	case r.Len() < 2:
		d.Bad("pipe_range", "holds %d pipe; each link needs two (upload and download)", r.Len())
	case r.Contains(nlcPipes.First) || r.Contains(nlcPipes.Last):
		d.Bad("pipe_range", "%d..%d includes pipes %d and %d of Apple's Network Link Conditioner, which macake must never touch", r.First, r.Last, nlcPipes.First, nlcPipes.Last)
	}
	for _, l := range []struct{ key, addr, what string }{
		{"metrics_listen", s.MetricsListen, "metrics are"},
		{"status_page_listen", s.StatusPageListen, "the status page is"},
	} {
		if l.addr == "" {
			continue
		}
		if msg := checkLoopbackListen(l.addr, l.what); msg != "" {
			d.Bad(l.key, "%s", msg)
		}
	}
	if g := s.OperatorGroup; g != NoOperatorGroup && !groupRE.MatchString(g) {
		d.Bad("operator_group", "%q is not a group name (letters, digits, _ . -, at most 32); use %q for root alone", g, NoOperatorGroup)
	}
	validateMQTT(d, &s.MQTT)
	if s.MetricsListen != "" && s.StatusPageListen != "" && sameSocket(s.MetricsListen, s.StatusPageListen) {
		d.Bad("status_page_listen", "%q and metrics_listen's %q would share a port on the same address; give each its own port", s.StatusPageListen, s.MetricsListen)
	}
}

// sameSocket reports whether two loopback listen addresses would take the
// same socket, so that the second cannot be bound: the same port, and
// hosts that meet, "localhost" meeting every loopback address (it
// resolves to 127.0.0.1, ::1 or both).
func sameSocket(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb {
		return false
	}
	if ha == "localhost" || hb == "localhost" {
		return true
	}
	ia, errA := netip.ParseAddr(ha)
	ib, errB := netip.ParseAddr(hb)
	return errA == nil && errB == nil && ia.Unmap() == ib.Unmap()
}

// checkDaemonPaths refuses the paths that would fail once used, as
// `macake validate` must: a state_dir that is not a directory or that
// group or others may write (sticky or not: /tmp), a log_file that is a
// directory or whose directory group or others may write; with owner (a
// run as root), also one that is not root's or lies under a directory
// others can change (fileowner.UnsafeDir, the checks the state lock and
// the log file make at run time).
func checkDaemonPaths(d config.Checker, s *Daemon, owner bool) {
	check := func(key, dir, what string) {
		if owner {
			if at, problem := fileowner.UnsafeDir(dir); at != "" {
				d.Bad(key, "%s %s is %s; macake keeps its files only where root alone can write", what, at, problem)
			}
			return
		}
		info, err := os.Stat(dir)
		switch {
		case err != nil:
		case !info.IsDir():
			d.Bad(key, "%s %s is not a directory", what, dir)
		case info.Mode().Perm()&0o022 != 0:
			d.Bad(key, "%s %s is writable by group or others (mode %04o); macake keeps its files only where root alone can write", what, dir, info.Mode().Perm())
		}
	}
	if d.Given("state_dir") {
		check("state_dir", s.StateDir, "the state directory")
	}
	if d.Given("log_file") && s.LogFile != "" {
		if info, err := os.Stat(s.LogFile); err == nil && info.IsDir() {
			d.Bad("log_file", "%q is a directory; name the file, e.g. %q", s.LogFile, filepath.Join(s.LogFile, "watch.log"))
			return
		}
		check("log_file", filepath.Dir(s.LogFile), "the log file's directory")
	}
}

// checkLoopbackListen explains what is wrong with the address of an
// endpoint (what: "metrics are"), or returns "". Only loopback is allowed:
// the endpoints reveal the user's networks and are served without
// authentication.
func checkLoopbackListen(addr, what string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return strconv.Quote(addr) + ` is not host:port, e.g. "127.0.0.1:9846"`
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return strconv.Quote(port) + " is not a port (1..65535)"
	}
	if host == "localhost" {
		return ""
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return strconv.Quote(host) + " is not a loopback address; " + what + " served only on 127.0.0.1, ::1 or localhost"
	}
	return ""
}

// DaemonFileFor returns where the daemon settings live for a policy
// directory: macake.toml beside it, so /etc/macake/links.d gives
// DaemonFile.
func DaemonFileFor(configDir string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(configDir)), "macake.toml")
}
