// SPDX-License-Identifier: Apache-2.0

// Package nsenter lets this process open sockets inside a Linux network
// namespace, without starting a process: Do runs a function on an OS
// thread switched into the namespace, and sockets created there stay in
// it for their whole life. Cubic makes a TCP socket use CUBIC, because a
// new namespace defaults to BBR, which keeps queues short and hides the
// very queueing a measurement wants to see (DESIGN §6). The selftest's
// tc measurement and the namespace test lab (internal/netns) share it.
package nsenter
