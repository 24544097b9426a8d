// SPDX-License-Identifier: Apache-2.0

package nsenter

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDoOpensSocketsInTheNamespace: a listener made inside Do is in the
// namespace (its loopback is not the host's), a dial made inside reaches
// it, and Cubic's sockets use CUBIC whatever the namespace's default.
func TestDoOpensSocketsInTheNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: creating a network namespace needs root (CI runs as root)")
	}
	name := fmt.Sprintf("macake-nsenter-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("skipping: cannot create a network namespace here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	ctx := context.Background()
	var ln net.Listener
	if err := Do(name, func() (err error) {
		ln, err = (&net.ListenConfig{Control: Cubic}).Listen(ctx, "tcp4", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if c, err := net.Dial("tcp4", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the host reached a listener that should be inside the namespace")
	}
	var c net.Conn
	if err := Do(name, func() (err error) {
		c, err = (&net.Dialer{Control: Cubic}).DialContext(ctx, "tcp4", ln.Addr().String())
		return err
	}); err != nil {
		t.Fatalf("dialing inside the namespace: %v", err)
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var cc string
	var serr error
	raw.Control(func(fd uintptr) { cc, serr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })
	if serr != nil || strings.TrimRight(cc, "\x00") != "cubic" {
		t.Errorf("congestion control %q (%v), want cubic", cc, serr)
	}
}

func TestDoNamesAMissingNamespace(t *testing.T) {
	err := Do("macake-no-such-namespace", func() error { t.Fatal("fn ran"); return nil })
	if err == nil || !strings.Contains(err.Error(), "macake-no-such-namespace") {
		t.Errorf("got %v", err)
	}
	if err := Cubic("udp4", "", nil); err != nil {
		t.Errorf("Cubic on UDP: %v", err)
	}
}
