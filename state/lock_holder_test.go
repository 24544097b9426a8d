// SPDX-License-Identifier: Apache-2.0

package state

import "testing"

func TestParseHolder(t *testing.T) {
	tests := []struct {
		in     string
		pid    int
		holder string
	}{
		{"4242\n", 4242, ""},
		{"4242 watch\n", 4242, "watch"},
		{"", 0, ""},
		{"-3 watch", 0, ""},
		{"garbage", 0, ""},
	}
	for _, tt := range tests {
		pid, holder := parseHolder(tt.in)
		if pid != tt.pid || holder != tt.holder {
			t.Errorf("parseHolder(%q) = %d, %q; want %d, %q", tt.in, pid, holder, tt.pid, tt.holder)
		}
	}
}

// FuzzParseHolder: a pid is positive or 0, and never a panic.
func FuzzParseHolder(f *testing.F) {
	f.Add("123 watch\n")
	f.Add("0")
	f.Add("99999999999999999999 x")
	f.Fuzz(func(t *testing.T, s string) {
		if pid, _ := parseHolder(s); pid < 0 {
			t.Errorf("negative pid %d from %q", pid, s)
		}
	})
}
