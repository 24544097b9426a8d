// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/macake/macake/internal/debounce"
)

// readEvents reads an event socket (wrapped as a pollable *os.File, so
// closing it unblocks the read) until ctx ends, and signals the returned
// channel for every message interesting() accepts. A buffer overflow
// (ENOBUFS) means events were lost, which is itself a reason to re-read.
func readEvents(ctx context.Context, f *os.File, interesting func(msg []byte) bool) <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	go func() {
		defer close(ch)
		buf := make([]byte, 64<<10)
		failures := 0
		for {
			n, err := f.Read(buf)
			if ctx.Err() != nil || errors.Is(err, os.ErrClosed) {
				return
			}
			if err != nil {
				if errors.Is(err, syscall.ENOBUFS) {
					debounce.Signal(ch)
					continue
				}
				failures++
				if failures > 10 {
					return // the watcher falls back to polling
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			failures = 0
			if interesting(buf[:n]) {
				debounce.Signal(ch)
			}
		}
	}()
	return ch
}
