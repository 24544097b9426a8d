// SPDX-License-Identifier: Apache-2.0

package bugreport

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/execrun"
)

// journal is a journalctl that prints its argv.
type journal struct{}

func (journal) Run(_ context.Context, c execrun.Command) (execrun.Result, error) {
	return execrun.Result{Stdout: []byte(strings.Join(c.Argv, " "))}, nil
}

// TestLogsLooksWhereTheDaemonWrites: macake.toml's log_file first, then
// the file the running watch says it writes (its --log-file), then the
// service's place: launchd's files on macOS, the unit's journal on Linux
// (issue 27, item 15).
func TestLogsLooksWhereTheDaemonWrites(t *testing.T) {
	dir := t.TempDir()
	settings, watch := filepath.Join(dir, "settings.log"), filepath.Join(dir, "watch.log")
	os.WriteFile(settings, []byte("from settings\n"), 0o644)
	os.WriteFile(watch, []byte("from watch\n"), 0o644)
	for _, tc := range []struct {
		src  LogSources
		want []string
	}{
		{LogSources{SettingsFile: settings, WatchFile: watch, GOOS: "linux"}, []string{"last log lines of " + settings}},
		{LogSources{WatchFile: watch, GOOS: "linux"}, []string{"last log lines of " + watch}},
		{LogSources{GOOS: "darwin"}, []string{"last log lines of /var/log/macake/watch.log", "last log lines of /var/log/macake/watch.stderr.log"}},
		{LogSources{GOOS: "linux"}, []string{"last journal lines of macake-watch.service"}},
	} {
		var got []string
		for _, s := range Logs(context.Background(), journal{}, tc.src, 5) {
			got = append(got, s.Title)
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%+v: sections %q, want %q", tc.src, got, tc.want)
		}
	}
}
