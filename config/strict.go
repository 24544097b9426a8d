// SPDX-License-Identifier: Apache-2.0

package config

import (
	"reflect"

	"github.com/macake/macake/config/tomltext"
)

// Checker is what the checks of a file other than a policy see of its
// decoding (DecodeStrict): whether the file sets a key, and the problems
// and warnings they report at a key, placed FILE:LINE:COL as a policy's
// are.
type Checker struct{ d *decoder }

// Given reports whether the file sets the key path ("mqtt.broker").
func (c Checker) Given(path string) bool { return c.d.given(path) }

// Bad reports a problem with the key path's value, at that value (or the
// nearest enclosing table the file gives): "path: message".
func (c Checker) Bad(path, format string, args ...any) { c.d.bad(path, format, args...) }

// Warn reports a warning at the key path's key.
func (c Checker) Warn(path, format string, args ...any) { c.d.warnAt(path, format, args...) }

// DecodeStrict decodes data, a settings file named name, into *dst (a
// pointer to its schema struct, holding the defaults) as strictly as Parse
// decodes a policy, then runs check on it. examples give valid values of
// the schema's own types for its type errors. It returns the warnings, and
// nil or an error holding one *Problem per problem (see Problems); *dst is
// only meaningful without one. It never panics, whatever data holds.
func DecodeStrict(name string, data []byte, dst any, examples map[reflect.Type]string, check func(Checker)) ([]Warning, error) {
	var probs problemList
	rv := reflect.ValueOf(dst).Elem()
	d := newDecoder(name, &probs, rv.Type())
	d.examples = examples
	if len(data) > MaxFileSize {
		probs.add(name, tomltext.Pos{}, "is %d bytes; a settings file is at most %d", len(data), MaxFileSize)
	} else if d.parseTOML(string(data)) {
		d.decodeStruct(rv, d.root)
		check(Checker{d})
	}
	d.finish()
	return probs.sortedWarnings(nil), probs.err(nil)
}

// ReadFile reads the settings file at path as Load reads a policy file:
// a regular file of at most MaxFileSize bytes, and unless opts turn the
// checks off, root's, written by root alone, below directories only root
// can change. The error holds the one *Problem that stopped it.
func ReadFile(path string, opts LoadOptions) ([]byte, error) {
	var probs problemList
	if !opts.SkipOwnershipCheck {
		if msg := unsafeAncestor(path); msg != "" {
			probs.add(path, tomltext.Pos{}, "%s", msg)
			return nil, probs.err(nil)
		}
	}
	data, ok := readPolicy(&probs, path, opts)
	if !ok {
		return nil, probs.err(nil)
	}
	return data, nil
}
