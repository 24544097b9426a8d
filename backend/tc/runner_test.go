// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/macake/macake/execrun"
)

// replayRunner answers commands from recorded output, keyed by argv joined
// with spaces, and records every call. An unknown command fails loudly, so
// a test notices any command it did not expect.
type replayRunner struct {
	mu sync.Mutex
	// answers maps "argv joined by spaces" to the recorded result.
	answers map[string]execrun.Result
	// okByDefault makes unknown commands succeed with no output (for
	// Execute tests that only record).
	okByDefault bool
	calls       []execrun.Command
}

func (r *replayRunner) Run(_ context.Context, cmd execrun.Command) (execrun.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, cmd)
	key := strings.Join(cmd.Argv, " ")
	if res, ok := r.answers[key]; ok {
		return res, nil
	}
	if r.okByDefault {
		return execrun.Result{}, nil
	}
	return execrun.Result{}, fmt.Errorf("replayRunner: unexpected command %q", key)
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
