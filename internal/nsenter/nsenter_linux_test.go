// SPDX-License-Identifier: Apache-2.0

package nsenter_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/internal/nsenter"
)

// TestDoOpensSocketsInTheNamespace: a listener made inside Do is in the
// namespace (its loopback is not the host's), a dial made inside reaches
// it, and Cubic's sockets use CUBIC whatever the namespace's default.
func TestDoOpensSocketsInTheNamespace(t *testing.T) {
	name := netns.New(t, "nsenter").Namespace("x").Name()
	ctx := context.Background()
	var ln net.Listener
	if err := nsenter.Do(name, func() (err error) {
		ln, err = (&net.ListenConfig{Control: nsenter.Cubic}).Listen(ctx, "tcp4", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	netns.AcceptEach(ln, func(c net.Conn) { c.Close() })
	if c, err := net.Dial("tcp4", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the host reached a listener that should be inside the namespace")
	}
	var c net.Conn
	if err := nsenter.Do(name, func() (err error) {
		c, err = (&net.Dialer{Control: nsenter.Cubic}).DialContext(ctx, "tcp4", ln.Addr().String())
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
	err := nsenter.Do("macake-no-such-namespace", func() error { t.Fatal("fn ran"); return nil })
	if err == nil || !strings.Contains(err.Error(), "macake-no-such-namespace") {
		t.Errorf("got %v", err)
	}
	if err := nsenter.Cubic("udp4", "", nil); err != nil {
		t.Errorf("Cubic on UDP: %v", err)
	}
}
