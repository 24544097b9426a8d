// SPDX-License-Identifier: Apache-2.0

// Package measure measures a link for people: it loads the link and reports
// its capacity and the latency the load adds (macake measure and bench),
// follows its latency and throughput over time (macake monitor), and
// records a measurement as the link's profile for macake watch.
//
// It sits on top of the other sensors (probe, ifstat, linkfacts) and the
// speed-test client, and keeps everything a command needs but flag parsing
// and printing, so that the CLI stays a thin layer and the statistics can be
// tested without a network. The statistics take their clock as arguments;
// the load test and the monitor loop read the wall clock, as the probes do.
package measure
