// SPDX-License-Identifier: Apache-2.0

package settings

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/config"
)

// FuzzParseDaemon feeds the settings parser (macake.toml) arbitrary files:
// it never panics, refusals carry a position inside the file and no raw
// control character, and accepted settings keep the invariants the
// daemon relies on (an absolute state directory, a valid pipe range).
func FuzzParseDaemon(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("state_dir = \"/var/db/macake\"\nanchor = \"com.apple/macake\"\npipe_range = { first = 48001, last = 48998 }\nlog_format = \"json\"\nlog_file = \"/var/log/macake/watch.log\"\nmetrics_listen = \"127.0.0.1:9846\"\n"))
	f.Add([]byte("state_dir = \"relative\"\nanchor = \"../x\"\npipe_range = { first = 40269, last = 40270 }\nlog_format = \"xml\"\n"))
	f.Add([]byte("metrics_listen = \"0.0.0.0:80\"\nunknown = 1\n[pipe_range]\nfirst = -1\n"))
	f.Add([]byte("anchor = \"\\u001b[2J\"\n\"\\nok: x\" = 1\n"))
	f.Add([]byte("x = " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, warnings, err := ParseDaemon("macake.toml", data)
		for _, w := range warnings {
			if config.Printable(w.Message) != w.Message {
				t.Fatalf("warning with a control character: %q", w.Message)
			}
		}
		if err != nil {
			if d != DaemonDefaults {
				t.Fatalf("refused settings are not the defaults: %+v", d)
			}
			lines := strings.Count(string(data), "\n") + 1
			for _, p := range config.Problems(err) {
				if p.File != "macake.toml" || p.Message == "" || config.Printable(p.Message) != p.Message || p.Line > lines {
					t.Fatalf("bad problem %+v (file has %d lines)", p, lines)
				}
			}
			return
		}
		if !filepath.IsAbs(d.StateDir) || d.PipeRange.First < 1 || d.PipeRange.Last < d.PipeRange.First || d.Anchor == "" {
			t.Fatalf("accepted impossible settings: %+v", d)
		}
	})
}
