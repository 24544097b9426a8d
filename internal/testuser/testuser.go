// SPDX-License-Identifier: Apache-2.0

// Package testuser creates throw-away users and groups for tests that
// must run something as a user other than root (who may pause the
// daemon, who is refused), and removes them when the test ends. It needs
// root and Linux's shadow tools (groupadd, useradd, userdel, groupdel)
// and util-linux's runuser; a test skips with the reason otherwise.
package testuser

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/macake/macake/execrun"
)

// User is a throw-away user.
type User struct {
	Name string
	UID  int
	// GID is its primary group (users, or nogroup).
	GID int
}

// tools are the programs the package runs.
var tools = []string{"groupadd", "useradd", "userdel", "groupdel", "runuser"}

// SharedDir makes a fresh directory every user may enter (t.TempDir's
// parent is the test user's alone), removed when the test ends. Its path
// is short (under os.TempDir), so that a Unix socket fits in it.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "macake-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Dir makes a SharedDir holding a copy of this test binary named name,
// for the other users to run.
func Dir(t testing.TB, name string) (dir, bin string) {
	t.Helper()
	dir = SharedDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, name)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// Available says why throw-away users cannot be made here, or "".
func Available() string {
	if runtime.GOOS != "linux" {
		return "throw-away users are made with Linux's shadow tools"
	}
	if os.Geteuid() != 0 {
		return "making throw-away users needs root"
	}
	for _, t := range tools {
		if path(t) == "" {
			return t + " is not installed"
		}
	}
	return ""
}

// Skip skips the test when throw-away users cannot be made.
func Skip(t testing.TB) {
	t.Helper()
	if why := Available(); why != "" {
		t.Skip(why)
	}
}

// path finds a tool in the directories the shadow tools live in, which a
// test's PATH may lack.
func path(tool string) string {
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := dir + "/" + tool
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// name is a fresh name: "mct", the kind (u or g), then random hex,
// within the 32 characters useradd allows.
func name(kind string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return "mct" + kind + hex.EncodeToString(b)
}

func run(t testing.TB, argv ...string) {
	t.Helper()
	argv[0] = path(argv[0])
	cmd := execrun.Command{Argv: argv}
	res, err := execrun.Exec{}.Run(context.Background(), cmd)
	if _, err = execrun.Check(cmd, res, err); err != nil {
		t.Fatalf("%v", err)
	}
}

// Group creates a group and returns its name and id; it is removed when
// the test ends.
func Group(t testing.TB) (string, int) {
	t.Helper()
	Skip(t)
	n := name("g")
	run(t, "groupadd", n)
	t.Cleanup(func() { run(t, "groupdel", n) })
	g, err := user.LookupGroup(n)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	return n, gid
}

// New creates a user without a home directory or a login shell, a member
// of groups besides its primary group; it is removed when the test ends.
func New(t testing.TB, groups ...string) User {
	t.Helper()
	Skip(t)
	n := name("u")
	argv := []string{"useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--no-user-group"}
	for i, g := range groups {
		if i == 0 {
			argv = append(argv, "--groups", g)
		} else {
			argv[len(argv)-1] += "," + g
		}
	}
	run(t, append(argv, n)...)
	t.Cleanup(func() { run(t, "userdel", n) })
	u, err := user.Lookup(n)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return User{Name: n, UID: uid, GID: gid}
}

// Command runs argv as the user, with the groups the group database
// gives it (runuser does what a login does: initgroups).
func (u User) Command(argv ...string) execrun.Command {
	return execrun.Command{Argv: append([]string{path("runuser"), "-u", u.Name, "--"}, argv...)}
}
