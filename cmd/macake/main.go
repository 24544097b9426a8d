// SPDX-License-Identifier: Apache-2.0

// Command macake brings latency-driven adaptive bandwidth shaping to macOS
// (pf + dummynet) and Linux (tc), declaratively: one TOML file per network
// link in /etc/macake/links.d, reconciled and steered from measured latency.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// version and commit are set with -ldflags -X at build time.
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
