// SPDX-License-Identifier: Apache-2.0

// Package lazyregexp is a package-level regexp compiled at its first use
// rather than at program start (as the go command's own lazyregexp). macake
// is one binary: a regexp.MustCompile in a package variable runs at every
// start of every command, `macake watch` included, and keeps its compiled
// program on the heap for good, though most are only for one backend or one
// command (dnctl's output is never parsed on Linux).
package lazyregexp

import (
	"os"
	"regexp"
	"strings"
	"sync"
)

// Regexp is a regexp.Regexp compiled the first time a method needs it.
type Regexp struct {
	str  string
	once sync.Once
	rx   *regexp.Regexp
}

func (r *Regexp) re() *regexp.Regexp {
	r.once.Do(func() { r.rx = regexp.MustCompile(r.str) })
	return r.rx
}

// inTest is true in a test binary, where New compiles at once, so that a
// bad pattern fails the package's tests even if none of them uses it.
var inTest = strings.HasSuffix(os.Args[0], ".test")

// New returns the lazy form of regexp.MustCompile(str).
func New(str string) *Regexp {
	r := &Regexp{str: str}
	if inTest {
		r.re()
	}
	return r
}

// FindAllStringSubmatch is regexp.Regexp's.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.re().FindAllStringSubmatch(s, n)
}

// FindAllStringSubmatchIndex is regexp.Regexp's.
func (r *Regexp) FindAllStringSubmatchIndex(s string, n int) [][]int {
	return r.re().FindAllStringSubmatchIndex(s, n)
}

// FindAllSubmatch is regexp.Regexp's.
func (r *Regexp) FindAllSubmatch(b []byte, n int) [][][]byte { return r.re().FindAllSubmatch(b, n) }

// FindStringSubmatch is regexp.Regexp's.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

// FindStringSubmatchIndex is regexp.Regexp's.
func (r *Regexp) FindStringSubmatchIndex(s string) []int { return r.re().FindStringSubmatchIndex(s) }

// FindSubmatch is regexp.Regexp's.
func (r *Regexp) FindSubmatch(b []byte) [][]byte { return r.re().FindSubmatch(b) }

// MatchString is regexp.Regexp's.
func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

// ReplaceAllString is regexp.Regexp's.
func (r *Regexp) ReplaceAllString(src, repl string) string { return r.re().ReplaceAllString(src, repl) }

// ReplaceAllStringFunc is regexp.Regexp's.
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.re().ReplaceAllStringFunc(src, repl)
}

// String returns the source text.
func (r *Regexp) String() string { return r.str }
