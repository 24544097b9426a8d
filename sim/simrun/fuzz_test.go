// SPDX-License-Identifier: Apache-2.0

package simrun

import (
	"errors"
	"strings"
	"testing"

	"github.com/macake/macake/sim"
)

// FuzzPrepare feeds `macake sim`'s string options to the parsers: whatever
// they hold, prepare never panics, a refusal is a UsageError (exit 64,
// naming a flag), and an accepted request has at least one arm and the
// queue and congestion control it parsed.
func FuzzPrepare(f *testing.F) {
	f.Add("", "", "", "", "")
	f.Add("fixed,upstream,ours", "cubic", "auto", "0.0001,0.002", "both")
	f.Add(" ours , ours ,", "reno", "min(bdp, 20ms)", "0,0", "download")
	f.Add("oracle", "newreno", "256KB", "1,0", "upload")
	f.Add("nope", "bbr", "9007199254740993KB", "x,y,z", "sideways")
	f.Add(",,,", "CUBIC", "-5ms", "NaN,0", "")
	f.Fuzz(func(t *testing.T, controllers, cc, queue, loss, direction string) {
		s := spec()
		s.Controllers, s.CC, s.Queue, s.Loss, s.Direction = controllers, cc, queue, loss, direction
		arms, opt, err := s.prepare(DefaultControllers())
		if err != nil {
			var ue UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--") && !strings.Contains(err.Error(), "queue") && !strings.Contains(err.Error(), "congestion") {
				t.Fatalf("refusal %v is not a usage error naming what to fix", err)
			}
			return
		}
		if len(arms) == 0 {
			t.Fatal("accepted with no arm")
		}
		if b := opt.Queue.Bytes; b < 0 || b > sim.MaxQueueBytes {
			t.Fatalf("queue %q accepted as %d bytes", queue, b)
		}
		if opt.Queue.Target < 0 {
			t.Fatalf("queue %q accepted with a negative target %v", queue, opt.Queue.Target)
		}
	})
}

// FuzzParseQueueRule: a rule that parses prints (String) as text that
// parses back to the same rule.
func FuzzParseQueueRule(f *testing.F) {
	for _, s := range []string{"auto", "bdp", "10ms", "256KB", "6000B", "1MB", "0B", "1023KB", "1024KB", "9223372036854775807B", "9007199254740993KB", " 5ms ", "min(bdp, 20ms)",
		"auto:perflow=3", "auto:target=40ms:floor=10ms", "10ms:packets=8:achieved", "auto:adapt=0.01", "256KB:perflow=2", "auto:adapt=1", "auto:red", "40ms:red:red"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := sim.ParseQueueRule(s)
		if err != nil {
			return
		}
		if q.Bytes < 0 || q.Bytes > sim.MaxQueueBytes || q.Target < 0 {
			t.Fatalf("%q parsed to an impossible rule %+v", s, q)
		}
		again, err := sim.ParseQueueRule(q.String())
		if err != nil || again != q {
			t.Fatalf("%q → %+v prints as %q, which reads back as %+v (%v)", s, q, q.String(), again, err)
		}
	})
}
