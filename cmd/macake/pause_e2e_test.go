// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/testuser"
)

// TestPauseE2E: `macake pause --for 10m` and `macake resume` work from
// the command line as root and as a member of the operator group, and a
// user outside it is refused and told what to do; status shows the pause
// with the time left, and a restarted watch keeps it.
func TestPauseE2E(t *testing.T) {
	testuser.Skip(t)
	m := newE2EMac(t)
	group, _ := testuser.Group(t)
	member, outsider := testuser.New(t, group), testuser.New(t)
	if err := os.WriteFile(filepath.Join(m.dir, "macake.toml"), []byte(fmt.Sprintf("operator_group = %q\n", group)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The other users reach the binary and the state directory's socket.
	for _, d := range []string{m.stateDir, m.dir, filepath.Dir(m.bin)} {
		for ; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
			os.Chmod(d, 0o755)
		}
	}
	m.write("cable", e2eFixed("50mbit"))
	w := m.startWatch()
	shaped := func() bool { return len(m.pipes()) == 2 }

	code, stdout, stderr := m.run("pause", "--for", "10m", "cable")
	if code != exitcode.OK || !strings.Contains(stdout, "Paused macake's shaping of cable until ") || !strings.Contains(stdout, "(10m0s); it comes back by itself then, or with 'macake resume cable'") {
		t.Fatalf("pause as root: exit %d\n%s%s", code, stdout, stderr)
	}
	m.eventually("the pipes gone", func() bool { return len(m.pipes()) == 0 })
	st := m.status()
	if len(st.Pauses) != 1 || st.Pauses[0].Link != "cable" || st.Pauses[0].By != "root" || st.Pauses[0].RemainingSeconds < 590 || st.Links[0].PausedUntil.IsZero() {
		t.Errorf("status while paused: %+v", st.Pauses)
	}
	_, text, _ := m.run("status")
	if !strings.Contains(text, "Paused: cable until") || !strings.Contains(text, "left; by root") || !strings.Contains(text, "  paused  ") {
		t.Errorf("status text while paused:\n%s", text)
	}

	// A restart of watch keeps the pause.
	if code := w.stop(15); code != 0 {
		t.Fatalf("watch exited %d", code)
	}
	w = m.startWatch()
	if len(m.pipes()) != 0 || len(m.status().Pauses) != 1 {
		t.Fatalf("the pause did not survive a restart: pipes %v\n%s", m.pipes(), m.log())
	}
	if code, stdout, stderr := m.run("resume", "cable"); code != exitcode.OK || !strings.Contains(stdout, "Resumed macake's shaping of cable.") {
		t.Fatalf("resume as root: exit %d\n%s%s", code, stdout, stderr)
	}
	m.eventually("the pipes back", shaped)

	as := func(u testuser.User, args ...string) (int, string, string) {
		t.Helper()
		argv := append([]string{"/usr/bin/env", "NO_COLOR=1", m.bin, "--config-dir", m.configDir, "--state-dir", m.stateDir}, args...)
		cmd := u.Command(argv...)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := execrun.Exec{Timeout: time.Minute}.Run(ctx, cmd)
		if err != nil {
			t.Fatalf("macake %v as %s: %v", args, u.Name, err)
		}
		return res.ExitCode, string(res.Stdout), string(res.Stderr)
	}
	code, stdout, stderr = as(member, "pause", "--for", "10m", "--json")
	var p statusapi.Pause
	if code != exitcode.OK || json.Unmarshal([]byte(stdout), &p) != nil || p.Link != statusapi.AllLinks || p.By != member.Name {
		t.Fatalf("pause as a member of %s: exit %d\n%s%s", group, code, stdout, stderr)
	}
	m.eventually("the pipes gone after the member's pause", func() bool { return len(m.pipes()) == 0 })
	if code, stdout, stderr := as(member, "resume"); code != exitcode.OK || !strings.Contains(stdout, "Resumed macake's shaping of every link.") {
		t.Fatalf("resume as a member: exit %d\n%s%s", code, stdout, stderr)
	}
	m.eventually("the pipes back after the member's resume", shaped)

	code, stdout, stderr = as(outsider, "pause", "--for", "10m")
	if code != exitcode.NoPerm || !strings.Contains(stderr, "answers root and group "+group+" only; run with sudo") {
		t.Errorf("pause as a user outside %s: exit %d, want %d saying who may\n%s%s", group, code, exitcode.NoPerm, stdout, stderr)
	}
	if len(m.pipes()) != 2 || len(m.status().Pauses) != 0 {
		t.Errorf("the outsider's pause took effect: pipes %v", m.pipes())
	}
	// Let the outsider connect: the daemon itself refuses, from the
	// peer's credentials.
	os.Chmod(statusapi.SocketPath(m.stateDir), 0o666)
	code, _, stderr = as(outsider, "pause", "--for", "10m")
	if code != exitcode.NoPerm || !strings.Contains(stderr, "only root and members of group "+group+" may send macake watch a pause") || !strings.Contains(stderr, "("+outsider.Name+") asked") {
		t.Errorf("pause as an outsider who can connect: exit %d\n%s", code, stderr)
	}
	if len(m.pipes()) != 2 {
		t.Errorf("the outsider's pause took effect: pipes %v", m.pipes())
	}
	if code, _, stderr := m.run("pause", "--for", "25h"); code != exitcode.Usage || !strings.Contains(stderr, "at most 24h0m0s") {
		t.Errorf("pause --for 25h: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := m.run("pause", "hotel"); code != exitcode.Failure || !strings.Contains(stderr, `no policy is named "hotel"; the policies are cable`) {
		t.Errorf("pause of an unknown link: exit %d\n%s", code, stderr)
	}
	if code := w.stop(15); code != 0 {
		t.Fatalf("watch exited %d", code)
	}
	if code, _, stderr := m.run("pause"); code != exitcode.Unavailable || !strings.Contains(stderr, "--state-dir "+m.stateDir+" down' takes the shaping off") {
		t.Errorf("pause without watch: exit %d\n%s", code, stderr)
	}
}
