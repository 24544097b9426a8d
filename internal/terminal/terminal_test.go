// SPDX-License-Identifier: Apache-2.0

package terminal

import (
	"flag"
	"strings"
	"testing"
)

func TestUseColor(t *testing.T) {
	for _, tc := range []struct {
		mode ColorMode
		env  map[string]string
		want bool
	}{
		{"always", nil, true},
		{"never", nil, false},
		// A strings.Builder is no terminal: auto never colours it.
		{ColorAuto, nil, false},
		{ColorAuto, map[string]string{"TERM": "xterm-256color"}, false},
	} {
		if got := UseColor(tc.mode, &strings.Builder{}, func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("UseColor(%s, %v) = %v, want %v", tc.mode, tc.env, got, tc.want)
		}
	}
}

func TestColorModeIsAFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	m := ColorAuto
	fs.Var(&m, "color", "")
	if err := fs.Parse([]string{"--color", "never"}); err != nil || m != "never" {
		t.Errorf("--color never: %v, %q", err, m)
	}
	if err := fs.Parse([]string{"--color", "sometimes"}); err == nil || !strings.Contains(err.Error(), "want auto, always or never") {
		t.Errorf("--color sometimes: %v", err)
	}
}

func TestUTF8Locale(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"LANG": "en_US.UTF-8"}, true},
		{map[string]string{"LANG": "de_DE.utf8"}, true},
		// The first that is set decides, as setlocale does.
		{map[string]string{"LC_ALL": "C", "LANG": "en_US.UTF-8"}, false},
		{map[string]string{"LC_CTYPE": "en_US.UTF-8", "LANG": "C"}, true},
	} {
		if got := UTF8Locale(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("UTF8Locale(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
}
