// SPDX-License-Identifier: Apache-2.0

package watchswitch

import (
	"testing"
	"time"

	"github.com/macake/macake/daemon/statusapi"
)

// TestShapingBack: On waits until the status shows no pause and every
// link that should be shaped shaped, with a released balanced link, an
// off link and a link with an error counting as back.
func TestShapingBack(t *testing.T) {
	shaped := statusapi.Link{Name: "home", Mode: "autorate", Shaped: true}
	for _, tc := range []struct {
		name string
		st   statusapi.Status
		want bool
	}{
		{"every link shaped", statusapi.Status{Links: []statusapi.Link{shaped}}, true},
		{"still paused", statusapi.Status{Daemon: statusapi.Daemon{PausedUntil: time.Unix(1000, 0)}, Links: []statusapi.Link{shaped}}, false},
		{"a link not shaped yet", statusapi.Status{Links: []statusapi.Link{shaped, {Name: "work", Mode: "autorate"}}}, false},
		{"a balanced link released", statusapi.Status{Links: []statusapi.Link{{Name: "home", Mode: "balanced", Controller: &statusapi.Controller{}}}}, true},
		{"a balanced link without its controller", statusapi.Status{Links: []statusapi.Link{{Name: "home", Mode: "balanced"}}}, false},
		{"an off link", statusapi.Status{Links: []statusapi.Link{{Name: "home", Mode: "off"}}}, true},
	} {
		if got := shapingBack(tc.st); got != tc.want {
			t.Errorf("%s: shapingBack = %v, want %v", tc.name, got, tc.want)
		}
	}
}
