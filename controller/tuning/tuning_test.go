// SPDX-License-Identifier: Apache-2.0

package tuning

import (
	"strings"
	"testing"
)

func TestModeParseAndString(t *testing.T) {
	for _, m := range []Mode{ModeAutorate, ModeBalanced, ModeFixed, ModeOff} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("adaptive"); err == nil || !strings.Contains(err.Error(), "autorate, balanced, fixed or off") {
		t.Errorf("ParseMode(adaptive) error %v; want the list of modes", err)
	}
}

func TestDefaultConfigIsFaithful(t *testing.T) {
	if (DefaultConfig().Improvements != Improvements{}) {
		t.Errorf("DefaultConfig has improvements switched on: %+v", DefaultConfig().Improvements)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig invalid: %v", err)
	}
}
