// SPDX-License-Identifier: Apache-2.0

// Package doccheck keeps the transcripts the documentation shows equal to
// the golden files the tests keep equal to macake's real output. Its test
// reads every Markdown file of the repository; a fenced block right after
// a marker comment must hold exactly what the marker names:
//
//	<!-- golden: cmd/macake/testdata/tour/plan.txt -->
//	```console
//	$ sudo macake plan
//	…
//	```
//
// The marker names one or more files (paths from the repository root,
// separated by commas), whose texts are joined, then options separated by
// semicolons, applied in this order:
//
//   - replace OLD => NEW: every OLD becomes NEW (a test's temporary
//     directory shown as the installed one, say);
//   - lines SPEC: only these lines, SPEC being comma-separated N, N-M or
//     N- (to the end), a line "…" standing for each gap;
//   - prompt TEXT: TEXT as the first line (the command, for golden files
//     that hold only its output).
//
// Every ```console block must have a marker, so that no transcript is
// shown without a test keeping it true. `go test ./internal/doccheck
// -update` rewrites the blocks from the files; the files themselves are
// rewritten by their own tests' -update.
package doccheck
