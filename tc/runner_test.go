// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/macake/macake/plan"
)

// replayRunner answers commands from recorded output, keyed by argv joined
// with spaces, and records every call. An unknown command fails loudly, so
// a test notices any command it did not expect.
type replayRunner struct {
	mu sync.Mutex
	// answers maps "argv joined by spaces" to the recorded result.
	answers map[string]plan.Result
	// okByDefault makes unknown commands succeed with no output (for
	// Execute tests that only record).
	okByDefault bool
	calls       []plan.Command
}

func (r *replayRunner) Run(_ context.Context, cmd plan.Command) (plan.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, cmd)
	key := strings.Join(cmd.Argv, " ")
	if res, ok := r.answers[key]; ok {
		return res, nil
	}
	if r.okByDefault {
		return plan.Result{}, nil
	}
	return plan.Result{}, fmt.Errorf("replayRunner: unexpected command %q", key)
}

func (r *replayRunner) commands() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.calls))
	for i, c := range r.calls {
		out[i] = strings.Join(c.Argv, " ")
		if c.Stdin != "" {
			out[i] += " <<< " + strings.ReplaceAll(strings.TrimSuffix(c.Stdin, "\n"), "\n", " \\n ")
		}
	}
	return out
}

// faultyRunner passes commands to an inner runner, except the ones fail
// selects, which fail the way tc does (exit 2, an error on stderr).
type faultyRunner struct {
	inner plan.Runner
	mu    sync.Mutex
	n     int
	fail  func(n int, cmd plan.Command) bool
	calls []plan.Command
}

func (r *faultyRunner) Run(ctx context.Context, cmd plan.Command) (plan.Result, error) {
	r.mu.Lock()
	r.n++
	n := r.n
	r.calls = append(r.calls, cmd)
	r.mu.Unlock()
	if r.fail != nil && r.fail(n, cmd) {
		return plan.Result{ExitCode: 2, Stderr: []byte("Error: injected failure.\n")}, nil
	}
	return r.inner.Run(ctx, cmd)
}

func (r *faultyRunner) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}
