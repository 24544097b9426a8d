// SPDX-License-Identifier: Apache-2.0

package e2e

// ClientDev is the testbed client's interface, the one macake shapes. It
// lives outside the Linux-only testbed because the policies the
// simulator's twin builds (AutoratePolicy) name it on every platform.
const ClientDev = "wan0"

// Reflectors are the server addresses the controller pings; their ICMP is
// exempt from macake's shaper. The independent probe uses another address
// (and UDP), so it is shaped like any other traffic.
var Reflectors = []string{"10.77.2.11", "10.77.2.12", "10.77.2.13", "10.77.2.14", "10.77.2.15", "10.77.2.16"}
