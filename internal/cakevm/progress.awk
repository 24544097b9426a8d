# SPDX-License-Identifier: Apache-2.0
#
# Progress for `go test -v` output from a guest: one line per top-level
# test as it ends (with its subtests' results), the whole output of a test
# that failed, and every line outside a test (PASS/FAIL, a panic, cakevm's
# own lines). A test still running at the end (a panic, a timeout) has its
# output printed too.
/^=== RUN   [^\/]+$/ { intest = 1; buf = ""; next }
/^=== (RUN|PAUSE|CONT|NAME) / { next }
/^--- (PASS|SKIP): / { print; fflush(); intest = 0; buf = ""; next }
/^--- FAIL: / { printf "%s", buf; print; fflush(); intest = 0; buf = ""; next }
intest { buf = buf $0 "\n"; next }
{ print; fflush() }
END { if (intest) printf "%s", buf }
