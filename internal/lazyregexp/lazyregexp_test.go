// SPDX-License-Identifier: Apache-2.0

package lazyregexp

import "testing"

func TestCompilesOnFirstUseAndMatchesAsRegexp(t *testing.T) {
	r := &Regexp{str: `^(\d+): (\w+)$`} // as New outside a test binary
	if r.rx != nil {
		t.Fatal("compiled before first use")
	}
	if m := r.FindStringSubmatch("12: pipe"); len(m) != 3 || m[1] != "12" || m[2] != "pipe" {
		t.Errorf("FindStringSubmatch: %q", m)
	}
	if r.rx == nil || !r.MatchString("7: q") || r.MatchString("x") {
		t.Error("MatchString after the first use")
	}
	if got := r.ReplaceAllString("3: a", "$2=$1"); got != "a=3" {
		t.Errorf("ReplaceAllString: %q", got)
	}
}

func TestNewCompilesAtOnceInTests(t *testing.T) {
	if !inTest {
		t.Fatal("a test binary is not recognised")
	}
	defer func() {
		if recover() == nil {
			t.Error("a bad pattern did not fail at New in a test binary")
		}
	}()
	New(`(`)
}
