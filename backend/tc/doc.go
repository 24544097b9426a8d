// SPDX-License-Identifier: Apache-2.0

// Package tc is macake's Linux backend: it renders a shape.State as tc
// objects, reads the live ones back from `tc -j` and `ip -j`, diffs the two
// into a plan.Plan and runs the plan's commands through a execrun.Runner.
//
// Per active link it owns (and touches nothing else):
//
//   - upload: the root qdisc of the link's interface, handle 4d4b: ("MK");
//   - download: an IFB device named ifb-macake<slot>, its root qdisc
//     (handle 4d4b:), and a u32 match-all filter at pref 19787 on the
//     interface's ingress hook that redirects every packet to the IFB;
//   - probe exemptions: u32 filters at prefs 19785 (IPv4) and 19786 (IPv6)
//     that let the controller's probes and their replies bypass the shaper
//     (ICMP to and from a reflector; TCP or UDP to and from its port), so
//     the controller measures the bottleneck and not its own queue;
//   - the ingress qdisc it added, removed only together with its own filters
//     and only when no other filter uses it.
//
// The shaper is CAKE when the kernel has sch_cake, otherwise htb with one
// class at the rate and a byte-limited bfifo leaf, which is exactly a
// dummynet pipe. Capabilities are probed at run time (Probe).
//
// Planning is pure: Diff(desired, live) never runs anything, so it is
// golden-tested on recorded tc output. Only Backend.Execute,
// Backend.ExecuteBatch, Backend.SetRate and the probes run commands, always through the
// execrun.Runner (execrun.Exec in production).
//
// The controller's hot path, SetRate, starts no process in production:
// Netlink writes the change over one long-lived rtnetlink socket
// (github.com/florianl/go-tc, chosen over github.com/vishvananda/netlink,
// which has no bfifo options and no CAKE), with exactly the values tc
// would send (checked against tc's own requests and listings). tc and ip
// stay where a plan is shown command by command and applied rarely:
// creating and removing shapers, exemption and redirect filters, the IFB
// devices (go-tc has no link API), and reading the live state (`tc -j`,
// `ip -j`), which the daemon does once per drift interval. The socket
// cannot hang: rtnetlink runs a request inside the sendmsg that carries
// it and queues the answer before returning; a lost answer (ENOBUFS) or a
// socket in doubt is closed and dialled afresh on the next change, and a
// failed change makes the daemon run a repair pass within a second. A whole plan
// (apply from empty, a policy save) is applied by ExecuteBatch as one `ip
// -batch -` for the IFBs it creates and one `tc -batch -` for the rest,
// whatever the number of links; tc's "Command failed -:N" names the op
// that failed.
package tc
