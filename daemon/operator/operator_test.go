// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/testuser"
)

// clientArg makes the test binary a client: it connects to the socket
// named by the next argument, reads one line and prints it. The tests run
// it as throw-away users.
const clientArg = "operator-client"

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == clientArg {
		c, err := net.Dial("unix", os.Args[2])
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(1)
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Print(line)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serve answers each connection with what policy p says of its peer at
// level, on a socket anyone may connect to.
func serve(t *testing.T, dir string, p Policy, level Level) string {
	t.Helper()
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			peer, err := p.Check(c, level, "pause", "macake pause")
			if err != nil {
				fmt.Fprintf(c, "refused %v: %v\n", peer.GIDs, err)
			} else {
				fmt.Fprintf(c, "allowed uid %d groups %v\n", peer.UID, peer.GIDs)
			}
			c.Close()
		}
	}()
	return sock
}

func runAs(t *testing.T, u testuser.User, bin, sock string) string {
	t.Helper()
	cmd := u.Command(bin, clientArg, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := execrun.Exec{}.Run(ctx, cmd)
	res, err = execrun.Check(cmd, res, err)
	if err != nil {
		t.Fatalf("running the client as %s: %v", u.Name, err)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// TestOperatorGroupFromPeerCredentials: a user in the operator group may
// pause, one outside it may not, and neither may do what only root may;
// the kernel's credentials carry the group (SO_PEERGROUPS), whatever the
// user's primary group.
func TestOperatorGroupFromPeerCredentials(t *testing.T) {
	testuser.Skip(t)
	group, gid := testuser.Group(t)
	member := testuser.New(t, group)
	outsider := testuser.New(t)
	dir, bin := testuser.Dir(t, "client")
	p, err := NewPolicy(group)
	if err != nil {
		t.Fatal(err)
	}
	operate := serve(t, filepath.Join(dir), p, Operate)
	if got := runAs(t, member, bin, operate); !strings.HasPrefix(got, fmt.Sprintf("allowed uid %d", member.UID)) || !strings.Contains(got, fmt.Sprint(gid)) {
		t.Errorf("the group's member: %q", got)
	}
	got := runAs(t, outsider, bin, operate)
	for _, want := range []string{"refused", "only root and members of group " + group, "uid " + fmt.Sprint(outsider.UID) + " (" + outsider.Name + ")", "run macake pause with sudo, or join group " + group} {
		if !strings.Contains(got, want) {
			t.Errorf("the outsider: %q lacks %q", got, want)
		}
	}

	rootDir := filepath.Join(dir, "root")
	os.Mkdir(rootDir, 0o755)
	rootOnly := serve(t, rootDir, p, Root)
	if got := runAs(t, member, bin, rootOnly); !strings.Contains(got, "only root may send macake watch a pause") {
		t.Errorf("the group's member asking for what only root may: %q", got)
	}

	noneDir := filepath.Join(dir, "none")
	os.Mkdir(noneDir, 0o755)
	none, _ := NewPolicy(NoGroup)
	noGroup := serve(t, noneDir, none, Operate)
	if got := runAs(t, member, bin, noGroup); !strings.Contains(got, "name no operator_group") {
		t.Errorf("no operator group: %q", got)
	}

	// Root (this process) may always.
	c, err := net.Dial("unix", operate)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(line), "allowed uid 0") {
		t.Errorf("root: %q", line)
	}
}

// TestNewPolicy: a group that does not exist leaves root alone allowed,
// with an error that says so; "none" and "" name no group.
func TestNewPolicy(t *testing.T) {
	p, err := NewPolicy("macake-no-such-group")
	if err == nil || !strings.Contains(err.Error(), "no such group") || p.Group != "" {
		t.Errorf("a missing group: %+v %v", p, err)
	}
	for _, g := range []string{"", NoGroup} {
		if p, err := NewPolicy(g); err != nil || p.Group != "" {
			t.Errorf("NewPolicy(%q) = %+v, %v", g, p, err)
		}
	}
	if p, err := NewPolicy("root"); err != nil || p.Group != "root" || p.GID != 0 {
		t.Errorf("NewPolicy(root) = %+v, %v", p, err)
	}
	// A refusal matches ErrRefused, so the socket can count it.
	err = Policy{DaemonUID: 0}.Allows(Peer{UID: 4242, GIDs: []int{4242}}, Operate, "pause", "macake pause")
	if !errors.Is(err, ErrRefused) {
		t.Errorf("refusal: %v", err)
	}
}
