// SPDX-License-Identifier: Apache-2.0

package shape

import (
	"fmt"
	"strings"
)

// MaxInterfaceName is the longest interface name in bytes: IFNAMSIZ − 1
// (16 with its NUL) on macOS and on Linux alike.
const MaxInterfaceName = 15

// OwnIFBPrefix starts the name of every IFB device macake creates on
// Linux to shape a link's download (ifb-macake0, ifb-macake1, …): macake's
// own, so never an interface a policy may shape.
const OwnIFBPrefix = "ifb-macake"

// CheckInterfaceName is the one rule for the name of an interface macake
// shapes: a policy's match.interface, and the backends' check before they
// render a pf rule or a tc command with it. (What sensing reads, such as
// the default route's interface, is any name the kernel has; the Linux
// counters refuse only a name that would leave /sys/class/net.) It returns
// nil for a name that matches ^[a-z][a-z0-9_.-]{0,14}$ (docs/CONFIG.md)
// and does not start with OwnIFBPrefix, otherwise an error that says what is wrong, worded to follow
// "interface: ".
//
// The rule takes every macOS name (en0, utun3, bridge100, pdp_ip0) and the
// Linux names people shape (pppoe-wan and br-lan on OpenWrt, VLANs such as
// eth0.2, wlp2s0). It refuses, for a reason each: the empty name; a path
// ("../eth0", "eth/0") or "." and "..", which would leave /sys/class/net;
// ':' (a Linux alias label, not an interface) and white space, which the
// Linux kernel refuses too and which would split a pf rule; upper case and
// other characters, which no macOS interface has, so that a macOS service
// name such as "Wi-Fi" is caught instead of never matching; and a name
// longer than the kernel's; and macake's own IFB devices (OwnIFBPrefix),
// which a policy must not shape: `validate` passed one, and once the
// device existed every pass failed for every link (issue 27). Linux itself
// allows more (any bytes but '/', ':' and white space), but a policy can
// name only what this rule takes, so a name outside it is never one macake
// shapes.
func CheckInterfaceName(name string) error {
	const allowed = "lower-case letters, digits, '.', '_' and '-'"
	switch {
	case name == "":
		return fmt.Errorf("name is empty")
	case strings.ContainsAny(name, "/: \t\n\v\f\r"):
		return fmt.Errorf("%q contains '/', ':' or white space: an interface name may only hold %s", name, allowed)
	case name[0] < 'a' || name[0] > 'z':
		return fmt.Errorf("%q must start with a lower-case letter", name)
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%q may only hold %s", name, allowed)
		}
	}
	if len(name) > MaxInterfaceName {
		return fmt.Errorf("%q is longer than %d characters", name, MaxInterfaceName)
	}
	if strings.HasPrefix(name, OwnIFBPrefix) {
		return fmt.Errorf("%q is one of macake's own IFB devices (%s…), which it creates to shape a link's download; name the interface the traffic uses", name, OwnIFBPrefix)
	}
	return nil
}
