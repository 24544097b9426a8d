// SPDX-License-Identifier: Apache-2.0

package settings

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/problemtest"
	"github.com/macake/macake/config/units"
)

// TestDefaultStateDirFollowsTheSystem: state goes where each system keeps
// a daemon's state; the operator group is the Mac's administrators, and
// nobody on Linux.
func TestDefaultStateDirFollowsTheSystem(t *testing.T) {
	for goos, want := range map[string]string{"darwin": "/var/db/macake", "linux": "/var/lib/macake"} {
		if got := DefaultStateDirFor(goos); got != want {
			t.Errorf("DefaultStateDirFor(%s) = %s, want %s", goos, got, want)
		}
	}
	for goos, want := range map[string]string{"darwin": "admin", "linux": NoOperatorGroup} {
		if got := DefaultOperatorGroupFor(goos); got != want {
			t.Errorf("DefaultOperatorGroupFor(%s) = %s, want %s", goos, got, want)
		}
	}
}

func TestLoadDaemonMissingFileGivesDefaults(t *testing.T) {
	d, w, err := LoadDaemon(filepath.Join(t.TempDir(), "macake.toml"), config.LoadOptions{})
	if err != nil || len(w) != 0 || d != DaemonDefaults {
		t.Fatalf("%+v %v %v", d, w, err)
	}
	if d.Anchor != "com.apple/macake" || d.PipeRange != (PipeRange{48001, 48998}) || d.StateDir != DefaultStateDirFor(runtime.GOOS) || d.LogFormat != LogText {
		t.Errorf("defaults: %+v", d)
	}
	if got := DaemonFileFor("/etc/macake/links.d/"); got != DaemonFile {
		t.Errorf("DaemonFileFor = %q, want %q", got, DaemonFile)
	}
}

func TestParseDaemon(t *testing.T) {
	d, w, err := ParseDaemon("macake.toml", []byte(`state_dir = "/var/db/macake-test"
anchor = "com.apple/macake-test"
pipe_range = { first = 50001, last = 50100 }
log_format = "json"
log_file = "/var/log/macake/macake.log"
metrics_listen = "127.0.0.1:9846"
status_page_listen = "localhost:9847"
status_page_control = false
operator_group = "netops"
`))
	if err != nil || len(w) != 0 {
		t.Fatalf("%v %v", err, w)
	}
	if d.StatusPageControl || d.OperatorGroup != "netops" {
		t.Errorf("status_page_control %v, operator_group %q", d.StatusPageControl, d.OperatorGroup)
	}
	if d.PipeRange.Len() != 100 || !d.PipeRange.Contains(50001) || d.PipeRange.Contains(50101) || d.LogFormat != LogJSON || d.MetricsListen != "127.0.0.1:9846" || d.StatusPageListen != "localhost:9847" {
		t.Errorf("%+v", d)
	}
	for _, ok := range []string{"[::1]:9846", "localhost:1"} {
		if _, _, err := ParseDaemon("m.toml", []byte("metrics_listen = \""+ok+"\"\n")); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func TestParseDaemonRejects(t *testing.T) {
	text := `state_dir = "var/db"
anchor = "com.apple/../x"
pipe_range = { first = 40000, last = 41000 }
log_format = "xml"
log_file = "macake.log"
metrics_listen = "0.0.0.0:9846"
Anchor = "x"
operator_group = "net ops"
`
	_, _, err := ParseDaemon("macake.toml", []byte(text))
	want := []string{
		`1:13: state_dir: "var/db" must be an absolute path`,
		`2:10: anchor: "com.apple/../x" is not an anchor name`,
		`3:14: pipe_range: 40000..41000 includes pipes 40269 and 40270 of Apple's Network Link Conditioner`,
		`4:14: log_format: unknown log format "xml"; use one of text, json`,
		`5:12: log_file: "macake.log" must be an absolute path`,
		`6:18: metrics_listen: "0.0.0.0" is not a loopback address`,
		`7:1: key "Anchor" must be lower-case`,
		`8:18: operator_group: "net ops" is not a group name (letters, digits, _ . -, at most 32); use "none" for root alone`,
	}
	var got []string
	for _, p := range config.Problems(err) {
		got = append(got, problemtest.Pos(p.Line, p.Col, p.Message))
	}
	problemtest.Expect(t, "problems", got, want)

	for text, part := range map[string]string{
		"pipe_range = { first = 10, last = 10 }\n":                               "holds 1 pipe",
		"pipe_range = { first = 0, last = 10 }\n":                                "must lie within 1..65535",
		"pipe_range = { frist = 10 }\n":                                          `did you mean "first"?`,
		"metrics_listen = \"9846\"\n":                                            "is not host:port",
		"metrics_listen = \"127.0.0.1:http\"\n":                                  "is not a port",
		"status_page_listen = \"192.168.1.5:9847\"\n":                            "the status page is served only on 127.0.0.1",
		"metrics_listen = \"[::1]:9846\"\nstatus_page_listen = \"[::1]:9846\"\n": "give each its own port",
		"interface = \"en0\"\n":                                                  `unknown key "interface" in the top level`,
		"state_dir = \n":                                                         "TOML syntax",
		"pipe_range = 5k\nlog_format = \"xml\"\n":                                `pipe_range: write the value in quotes: pipe_range = "5k"`,
		"log_format = \"xml\"\npipe_range = 5k\n":                                `unknown log format "xml"`,
		"pipe_range = 5\n":                                                       `pipe_range: must be a table, e.g. { first = 48001, last = 48998 }, not an integer`,
		"log_format = true\n":                                                    `log_format: must be a string, e.g. "text", not a boolean`,
	} {
		if _, _, err := ParseDaemon("m.toml", []byte(text)); err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("%q: %v, want %q", text, err, part)
		}
	}
	_, w, err := ParseDaemon("m.toml", []byte("anchor = \"macake\"\n"))
	if err != nil || len(w) != 1 || !strings.Contains(w[0].Message, "not under com.apple/") {
		t.Errorf("anchor outside com.apple: %v %v", w, err)
	}
}

func TestLoadDaemonChecksOwnership(t *testing.T) {
	path := filepath.Join(t.TempDir(), "macake.toml")
	if err := os.WriteFile(path, []byte("log_format = \"json\"\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadDaemon(path, config.LoadOptions{}); err == nil || !strings.Contains(err.Error(), "refusing to use") {
		t.Errorf("world-writable settings accepted: %v", err)
	}
	if d, _, err := LoadDaemon(path, config.LoadOptions{SkipOwnershipCheck: true}); err != nil || d.LogFormat != LogJSON {
		t.Errorf("%+v %v", d, err)
	}
}

// TestParseDaemonMQTT: the [mqtt] table, its defaults, and every mistake
// placed at its key with what to write instead.
func TestParseDaemonMQTT(t *testing.T) {
	d, w, err := ParseDaemon("macake.toml", []byte(`[mqtt]
broker = "mqtts://broker.lan:8884"
username = "macake"
password_file = "/etc/macake/mqtt-password"
ca_file = "/etc/macake/mqtt-ca.pem"
topic_prefix = "home/router"
control = true
pause_for = "2h"
`))
	if err != nil || len(w) != 0 {
		t.Fatalf("%v %v", err, w)
	}
	m := d.MQTT
	if !m.Enabled() || m.Username != "macake" || m.TopicPrefix != "home/router" || !m.Control || m.PauseFor != units.Duration(2*time.Hour) ||
		m.DiscoveryPrefix != "homeassistant" || m.Interval != units.Duration(10*time.Second) {
		t.Errorf("%+v", m)
	}
	if DaemonDefaults.MQTT.Enabled() || DaemonDefaults.MQTT.Control {
		t.Errorf("MQTT is on by default: %+v", DaemonDefaults.MQTT)
	}
	for _, tc := range []struct{ text, want string }{
		{`broker = "192.168.1.10:1883"`, `mqtt.broker: "192.168.1.10:1883" is not a broker URL`},
		{`broker = "http://b:1883"`, `"http" is not a broker's scheme`},
		{`broker = "mqtt://u:p@b"`, "keep the credentials out of the URL"},
		{`broker = "mqtt://b/x"`, "has a path or a query"},
		{`broker = "mqtt://b:99999"`, `"99999" is not a port`},
		{"broker = \"mqtt://b\"\npassword_file = \"/p\"", "a password needs a user name"},
		{"broker = \"mqtt://b\"\nusername = \"u\"\npassword_file = \"p\"", `mqtt.password_file: "p" must be an absolute path`},
		{"broker = \"mqtt://b\"\ntopic_prefix = \"macake/#\"", "holds a wildcard"},
		{"broker = \"mqtt://b\"\ntopic_prefix = \"/macake\"", "has an empty level"},
		{"broker = \"mqtt://b\"\ndiscovery_prefix = \"$SYS\"", "starts with $"},
		{"broker = \"mqtt://b\"\ninterval = \"100ms\"", "mqtt.interval: 100ms is outside 1s..1h0m0s"},
		{"broker = \"mqtt://b\"\npause_for = \"25h\"", "mqtt.pause_for: 25h0m0s: give a length above 0 and at most 24h0m0s"},
		{"broker = \"mqtt://b\"\nretain = true", `unknown key "retain" in [mqtt]`},
	} {
		_, _, err := ParseDaemon("macake.toml", []byte("[mqtt]\n"+tc.text+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.text, err, tc.want)
		}
	}
	for _, tc := range []struct{ text, want string }{
		{"control = true", "[mqtt] names no broker, so nothing is published"},
		{"broker = \"mqtt://b\"\nca_file = \"/ca.pem\"", "is not TLS (mqtts://), so ca_file is not used"},
	} {
		_, w, err := ParseDaemon("macake.toml", []byte("[mqtt]\n"+tc.text+"\n"))
		if err != nil || len(w) != 1 || !strings.Contains(w[0].String(), tc.want) {
			t.Errorf("%s: %v, warnings %v; want the warning %q", tc.text, err, w, tc.want)
		}
	}
}

// TestLoadDaemonRefusesWhatFailsLater: settings that pass the syntax but
// fail once used are refused when loaded (so `macake validate` says so):
// a state directory or log file directory others may write, a log file
// that is a directory, an anchor component pf cannot hold, and the page
// and the metrics on one socket (issue 27).
func TestLoadDaemonRefusesWhatFailsLater(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	os.Mkdir(shared, 0o755)
	os.Chmod(shared, 0o1777)
	private := t.TempDir()
	long := strings.Repeat("a", 64)
	for text, want := range map[string]string{
		`state_dir = "` + shared + `"`:                                                 "state_dir: the state directory " + shared + " is writable by group or others",
		`log_file = "` + private + `"`:                                                 "log_file: \"" + private + "\" is a directory",
		`log_file = "` + filepath.Join(shared, "watch.log") + `"`:                      "log_file: the log file's directory " + shared + " is writable by group or others",
		`anchor = "com.apple/` + long + `"`:                                            "is 64 bytes; pf takes at most 63",
		"status_page_listen = \"localhost:9847\"\nmetrics_listen = \"127.0.0.1:9847\"": "would share a port",
		"status_page_listen = \"[::1]:9847\"\nmetrics_listen = \"localhost:9847\"":     "would share a port",
		`state_dir = "` + private + `"`:                                                "",
		`log_file = "` + filepath.Join(private, "watch.log") + `"`:                     "",
		"status_page_listen = \"127.0.0.2:9847\"\nmetrics_listen = \"127.0.0.1:9847\"": "",
		"status_page_listen = \"localhost:9847\"\nmetrics_listen = \"127.0.0.1:9846\"": "",
	} {
		path := filepath.Join(t.TempDir(), "macake.toml")
		if err := os.WriteFile(path, []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := LoadDaemon(path, config.LoadOptions{SkipOwnershipCheck: true})
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", text, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want a refusal saying %q", text, err, want)
		}
	}
}

// TestLoadDaemonChecksTheDirectoriesAbove: as root, a settings file below
// a directory other users may write is refused, naming that directory, as
// config.Load refuses a policy directory there.
func TestLoadDaemonChecksTheDirectoriesAbove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the ownership checks apply to root")
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.MkdirAll(open, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(open, "macake.toml")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("refusing to use: %s, above it, is writable by group or others (mode 0777), so another user could put their own files in its place; fix: sudo chown root %s && sudo chmod go-w %s", open, open, open)
	_, _, err := LoadDaemon(path, config.LoadOptions{})
	if probs := config.Problems(err); len(probs) != 1 || probs[0].Message != want {
		t.Errorf("LoadDaemon: %v\nwant %s", err, want)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadDaemon(path, config.LoadOptions{}); err != nil {
		t.Errorf("once fixed: %v", err)
	}
}
