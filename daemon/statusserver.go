// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/logging"
)

// serveStatus keeps the status socket up until ctx ends: when it cannot
// be bound, or the server stops (its listener broke), it says so at ERROR
// and tries again every retry (statusapi.BindRetry in watch), and it says when
// the socket answers again. Without it, a status server that
// stopped left `macake status` reporting "not running" while watch shaped
// (issue 12).
func serveStatus(ctx context.Context, socket string, h statusapi.Handler, log *slog.Logger, retry time.Duration) {
	failing := false
	for ctx.Err() == nil {
		ln, err := statusapi.Listen(socket, h.Operators)
		if err == nil {
			if failing {
				log.Info("'macake status' can ask this daemon again", "socket", socket)
				failing = false
			}
			err = statusapi.Serve(ctx, ln, h, log)
			if err == nil || ctx.Err() != nil {
				return
			}
			log.Error("the status socket stopped; binding it again", "socket", socket, "retry_in", retry, logging.KeyError, err)
		} else if !failing {
			log.Error("'macake status' cannot ask this daemon; retrying", "socket", socket, "retry_in", retry, logging.KeyError, err)
		}
		failing = true
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
}
