// SPDX-License-Identifier: Apache-2.0

package config

import "testing"

func TestInvocationCommandRepeatsTheDirectories(t *testing.T) {
	for _, tc := range []struct {
		in     Invocation
		asRoot bool
		args   []string
		want   string
	}{
		{Invocation{}, false, []string{"validate"}, "macake validate"},
		{Invocation{ConfigDir: "/x/links.d"}, true, []string{"plan"}, "sudo macake --config-dir /x/links.d plan"},
		{Invocation{ConfigDir: "/x", StateDir: "/y"}, true, []string{"measure", "--link", "home"}, "sudo macake --config-dir /x --state-dir /y measure --link home"},
		{Invocation{StateDir: "/my state"}, false, []string{"status"}, "macake --state-dir '/my state' status"},
		{Invocation{ConfigDir: "/it's"}, false, nil, `macake --config-dir '/it'\''s'`},
	} {
		if got := tc.in.Command(tc.asRoot, tc.args...); got != tc.want {
			t.Errorf("%+v.Command(%v, %q) = %q, want %q", tc.in, tc.asRoot, tc.args, got, tc.want)
		}
	}
}
