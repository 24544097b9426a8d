// SPDX-License-Identifier: Apache-2.0

package config

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/macake/macake/config/tomltext"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/internal/suggest"
)

// MaxFileSize bounds what the loader reads, in bytes: policy files are a few hundred
// bytes (the longest example, commented, is 1.6 KB), and a huge one is a
// mistake (or a device file).
const MaxFileSize = 64 << 10

// decoder decodes one TOML file strictly into a schema struct, collecting
// every problem with its position instead of stopping at the first.
//
// BurntSushi/toml stops at the first bad value and matches keys
// case-insensitively, so the decoder does not let it fill the struct.
// It parses the file into toml.Primitive values (one per key, each
// remembering its key path), reads each value as plain data, and sets the
// struct fields itself by their exact toml tags.
type decoder struct {
	file  string
	src   *tomltext.Source
	md    toml.MetaData
	probs *problemList
	// index holds every key of the file by its dotted path.
	index map[string]*entry
	root  *entry
	// failed holds the key paths whose value could not be decoded, so that
	// checks relating them to other keys stay quiet instead of reporting
	// consequences of the same mistake.
	failed map[string]bool
	// schema is the struct type the file decodes into.
	schema reflect.Type
	// homes maps each schema key to the tables it exists in, to say where
	// a misplaced key belongs.
	homes map[string][]string
	// unquoted holds the problems of values written without their quotes
	// (download = 100mbit), reported by finish; see parseTOML.
	unquoted []*Problem
	// muted holds the lines whose other problems finish drops: those
	// values were quoted so the rest of the file could be checked, and
	// their unquoted problem says all there is to fix first.
	muted map[int]bool
	// mark is where this file's problems start in probs.
	mark int
	// examples are the file's own valid values of its text and table
	// types, for type errors (DecodeStrict's); nil for a policy.
	examples map[reflect.Type]string
}

// newDecoder returns a decoder of one file into a struct of type schema.
func newDecoder(file string, probs *problemList, schema reflect.Type) *decoder {
	return &decoder{file: file, probs: probs, schema: schema, homes: schemaHomes(schema), mark: len(probs.problems)}
}

// finish completes the file's problems: it drops the muted lines' and adds
// the unquoted values'. Call it once the file is decoded and validated.
func (d *decoder) finish() {
	if len(d.muted) > 0 {
		kept := d.probs.problems[:d.mark]
		for _, p := range d.probs.problems[d.mark:] {
			if p.File != d.file || !d.muted[p.Line] {
				kept = append(kept, p)
			}
		}
		d.probs.problems = kept
	}
	d.probs.problems = append(d.probs.problems, d.unquoted...)
	d.unquoted, d.muted = nil, nil
}

// entry is one key of the file.
type entry struct {
	path     toml.Key
	prim     toml.Primitive
	raw      any
	line     int // the library's line hint; 0 for an implicit table
	start    int // the library's byte-offset hint
	children []*entry
	// elems are the byte offsets of an array value's elements, found
	// when a problem first needs one (elemPos).
	elems []int
}

func (e *entry) name() string { return e.path[len(e.path)-1] }

// errProbe makes the library report a key's position: the only way it
// exposes it (its keyInfo is unexported).
var errProbe = errors.New("position probe")

type positionProbe struct{}

func (positionProbe) UnmarshalTOML(any) error { return errProbe }

// parseTOML parses text, returning whether it is TOML; problems go to
// d.probs (syntax) or wait for finish (unquoted values).
//
// The parser stops at the first syntax error, and the commonest one,
// `download = 100mbit` without quotes, would hide every other problem of
// the file behind a message about TOML's grammar. So on a syntax error the
// lines holding a bare value with a unit are each reported with how to
// write them, then quoted in a copy of the text and the copy parsed again,
// to check everything else in the same run.
func (d *decoder) parseTOML(text string) (ok bool) {
	d.src = tomltext.NewSource(text)
	if off, problem, bad := tomltext.TooComplex(text); bad {
		// Before the library sees it: see MaxNesting and MaxKeys.
		d.probs.add(d.file, d.src.At(off), "%s", problem)
		return false
	}
	top, err := decodeTOML(text, &d.md)
	if err != nil {
		unquoted := tomltext.FindUnquoted(text)
		if len(unquoted) == 0 {
			d.syntaxProblem(err)
			return false
		}
		d.muted = map[int]bool{}
		for _, u := range unquoted {
			d.unquoted = append(d.unquoted, d.unquotedProblem(u))
			d.muted[u.Line] = true
		}
		fixed := tomltext.QuoteValues(text, unquoted)
		d.src = tomltext.NewSource(fixed)
		if top, err = decodeTOML(fixed, &d.md); err != nil {
			d.syntaxProblem(err)
			return false
		}
	}
	d.index = map[string]*entry{}
	d.root = &entry{}
	d.root.children = d.buildChildren(nil, top)
	return true
}

// decodeTOML parses text into its top-level keys, setting *md.
func decodeTOML(text string, md *toml.MetaData) (top map[string]toml.Primitive, err error) {
	// The library is fuzzed upstream; this keeps a library bug in a corner
	// of the grammar from taking the daemon down.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("TOML parser failed: %v", r)
		}
	}()
	*md, err = toml.Decode(text, &top)
	return top, err
}

// syntaxProblem reports the parser's error at its position in d.src.
func (d *decoder) syntaxProblem(err error) {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		at := d.hintPos(pe.Position.Line, pe.Position.Start)
		if pe.Position.Start > 0 && pe.Position.Start <= len(d.src.Text) {
			// The offset is exact; the lexer's line may already be past
			// the newline the error is about.
			at = d.src.At(pe.Position.Start)
		}
		d.probs.add(d.file, at, "TOML syntax: %s", pe.Message)
		return
	}
	d.probs.add(d.file, tomltext.Pos{Line: 1, Col: 1}, "TOML: %s", strings.TrimPrefix(err.Error(), "toml: "))
}

func (d *decoder) buildChildren(path toml.Key, m map[string]toml.Primitive) []*entry {
	out := make([]*entry, 0, len(m))
	for k, p := range m {
		e := &entry{path: append(slices.Clone(path), k), prim: p}
		var raw any
		if err := d.md.PrimitiveDecode(p, &raw); err == nil {
			e.raw = raw
		}
		var pe toml.ParseError
		if err := d.md.PrimitiveDecode(p, positionProbe{}); errors.As(err, &pe) {
			e.line, e.start = pe.Position.Line, pe.Position.Start
		}
		if _, isTable := raw.(map[string]any); isTable {
			var sub map[string]toml.Primitive
			if err := d.md.PrimitiveDecode(p, &sub); err == nil {
				e.children = d.buildChildren(e.path, sub)
			}
		}
		if e.line == 0 && len(e.children) > 0 {
			// An implicit table ("[a.b]" makes "a"; "a.b = 1" too): its
			// key is on its first child's line.
			e.line, e.start = e.children[0].line, e.children[0].start
		}
		d.index[e.path.String()] = e
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *entry) int {
		if a.line != b.line {
			return a.line - b.line
		}
		return a.start - b.start
	})
	return out
}

// hintPos turns a library line and byte offset into a position, trusting
// the line and using the offset only when it lies on that line.
func (d *decoder) hintPos(line, start int) tomltext.Pos {
	ls, le, ok := d.src.Line(line)
	if !ok {
		if start > 0 {
			return d.src.At(start)
		}
		return tomltext.Pos{Line: 1, Col: 1}
	}
	if start >= ls && start <= le {
		return d.src.At(start)
	}
	return tomltext.Pos{Line: line, Col: 1}
}

// findKey finds e's key in the text. The library's line is usually the
// key's, but for a multi-line value it is the line the value ends on, so
// the line of its byte offset is tried too.
func (d *decoder) findKey(e *entry) (int, bool) {
	if off, ok := d.src.FindKey(e.line, e.start, e.name()); ok {
		return off, true
	}
	if e.start > 0 {
		if l := d.src.At(e.start).Line; l != e.line {
			return d.src.FindKey(l, e.start, e.name())
		}
	}
	return 0, false
}

// keyPos is where e's key is written.
func (d *decoder) keyPos(e *entry) tomltext.Pos {
	if off, ok := d.findKey(e); ok {
		return d.src.At(off)
	}
	return d.hintPos(e.line, e.start)
}

// valueOffset is the byte offset where e's value starts, or -1.
func (d *decoder) valueOffset(e *entry) int {
	if off, ok := d.findKey(e); ok {
		if v := d.src.ValueAfter(off, e.name()); v != off {
			return v
		}
	}
	return -1
}

// valuePos is where e's value is written.
func (d *decoder) valuePos(e *entry) tomltext.Pos {
	if v := d.valueOffset(e); v >= 0 {
		return d.src.At(v)
	}
	return d.keyPos(e)
}

// elemPos is where element i of the array e is written.
func (d *decoder) elemPos(e *entry, i int) tomltext.Pos {
	if e.elems == nil {
		// Found once per array: a problem in each element of a long
		// one must not scan it again each time.
		e.elems = []int{}
		if v := d.valueOffset(e); v >= 0 {
			e.elems = d.src.ArrayElems(v)
		}
	}
	if i < len(e.elems) {
		return d.src.At(e.elems[i])
	}
	return d.valuePos(e)
}

// lookup returns the entry for a dotted key path, or nil when the file
// does not give it.
func (d *decoder) lookup(path string) *entry { return d.index[path] }

func (d *decoder) markFailed(path string) {
	if d.failed == nil {
		d.failed = map[string]bool{}
	}
	d.failed[path] = true
}

// decoded reports whether none of the key paths failed to decode.
func (d *decoder) decoded(paths ...string) bool {
	for _, p := range paths {
		if d.failed[p] {
			return false
		}
	}
	return true
}

// given reports whether the file sets the key path.
func (d *decoder) given(path string) bool { return d.index[path] != nil }

// posOf returns the position of a key's value, or when the file does not
// give it, that of the nearest enclosing table it does give, or 1:1.
func (d *decoder) posOf(path string) tomltext.Pos {
	for p := path; p != ""; {
		if e := d.index[p]; e != nil {
			if p == path {
				return d.valuePos(e)
			}
			return d.keyPos(e)
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return tomltext.Pos{Line: 1, Col: 1}
}

// keyPosOf returns the position of a key (not its value), like posOf.
func (d *decoder) keyPosOf(path string) tomltext.Pos {
	if e := d.index[path]; e != nil {
		return d.keyPos(e)
	}
	return d.posOf(path)
}

// tomlFields maps a struct's exact toml tag names to field indexes.
func tomlFields(t reflect.Type) (map[string]int, []string) {
	fields := map[string]int{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		fields[name] = i
		names = append(names, name)
	}
	return fields, names
}

var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

// isLeaf reports whether values of t are written as one TOML value.
func isLeaf(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(textUnmarshalerType) || t.Kind() != reflect.Struct
}

// schemaHomes lists, for every key of the schema rooted at t, the tables
// it exists in ("" for the top level).
func schemaHomes(t reflect.Type) map[string][]string {
	homes := map[string][]string{}
	var walk func(t reflect.Type, table string)
	walk = func(t reflect.Type, table string) {
		fields, names := tomlFields(t)
		for _, n := range names {
			homes[n] = append(homes[n], table)
			ft := t.Field(fields[n]).Type
			if !isLeaf(ft) {
				walk(ft, strings.TrimPrefix(table+"."+n, "."))
			}
		}
	}
	walk(t, "")
	return homes
}

// tableName is how messages name the table at path.
func tableName(path toml.Key) string {
	if len(path) == 0 {
		return "the top level"
	}
	if len(path) == 1 {
		return "[" + path[0] + "]"
	}
	return path.String()
}

// decodeStruct sets the fields of rv (a struct) from the children of e.
func (d *decoder) decodeStruct(rv reflect.Value, e *entry) {
	fields, names := tomlFields(rv.Type())
	for _, c := range e.children {
		i, ok := fields[c.name()]
		if !ok {
			d.unknownKey(c, e.path, names)
			continue
		}
		d.decodeValue(rv.Field(i), c.raw, c, -1)
	}
}

func (d *decoder) unknownKey(c *entry, table toml.Key, names []string) {
	key := c.name()
	_, isTable := c.raw.(map[string]any)
	what := "key"
	if isTable && len(c.path) == 1 {
		what = "table"
	}
	for _, n := range names {
		if strings.EqualFold(n, key) {
			d.markFailed(append(slices.Clone(table), n).String())
			d.probs.add(d.file, d.keyPos(c), "%s %q must be lower-case: write %q", what, key, n)
			return
		}
	}
	p := d.keyPos(c)
	if what == "table" {
		msg := fmt.Sprintf("unknown table [%s]", key)
		if s := suggest.Closest(key, names); s != "" {
			msg += fmt.Sprintf(" (did you mean [%s]?)", s)
		}
		d.probs.add(d.file, p, "%s", msg)
		return
	}
	if s := suggest.Closest(key, names); s != "" {
		d.probs.add(d.file, p, "unknown key %q in %s (did you mean %q?)", key, tableName(table), s)
		return
	}
	lkey := strings.ToLower(key)
	if homes := d.homes[lkey]; len(homes) > 0 {
		where := make([]string, len(homes))
		for i, h := range homes {
			if h == "" {
				where[i] = "the top level"
			} else {
				where[i] = "[" + h + "]"
			}
		}
		d.probs.add(d.file, p, "key %q does not belong in %s; it goes in %s", key, tableName(table), strings.Join(where, " or "))
		return
	}
	d.probs.add(d.file, p, "unknown key %q in %s; known keys: %s", key, tableName(table), strings.Join(names, ", "))
}

// describe names a TOML value's type for messages.
func describe(raw any) string {
	switch raw.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a number with a fraction"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	case nil:
		return "nothing"
	}
	return "a date or time"
}

// examples shows a valid value of each text type in type errors.
var examples = map[reflect.Type]string{
	reflect.TypeFor[units.Rate]():       `"250mbit"`,
	reflect.TypeFor[units.RateOrAuto](): `"250mbit" or "auto"`,
	reflect.TypeFor[units.Size]():       `"256KB"`,
	reflect.TypeFor[units.SizeOrAuto](): `"auto" or "256KB"`,
	reflect.TypeFor[units.Duration]():   `"300ms"`,
	reflect.TypeFor[HardwareAddr]():     `"74:24:9f:00:00:01"`,
	reflect.TypeFor[netip.Addr]():       `"192.168.1.1"`,
	reflect.TypeFor[Reflector]():        `"1.1.1.1" or "tcp:1.1.1.1:443"`,
	reflect.TypeFor[Mode]():             `"autorate"`,
	reflect.TypeFor[DirectionMode]():    `"fixed"`,
	reflect.TypeFor[Diffserv]():         `"diffserv4"`,
	reflect.TypeFor[Isolation]():        `"dual-srchost"`,
	reflect.TypeFor[Bounds]():           `{ min = "25mbit", max = "400mbit" }`,
}

// example is ", e.g. " and a valid value of t, from the file's own
// examples (DecodeStrict's) or the policies', or "".
func (d *decoder) example(t reflect.Type) string {
	if ex, ok := d.examples[t]; ok {
		return ", e.g. " + ex
	}
	if ex, ok := examples[t]; ok {
		return ", e.g. " + ex
	}
	return ""
}

// decodeValue sets fv from the TOML value raw of entry e (element elem of
// it when elem >= 0), or records why it cannot.
func (d *decoder) decodeValue(fv reflect.Value, raw any, e *entry, elem int) {
	name := e.path.String()
	at := func() tomltext.Pos { return d.valuePos(e) }
	if elem >= 0 {
		name = fmt.Sprintf("%s[%d]", name, elem)
		at = func() tomltext.Pos { return d.elemPos(e, elem) }
	}
	bad := func(format string, args ...any) {
		d.markFailed(e.path.String())
		d.probs.add(d.file, at(), "%s: %s", name, fmt.Sprintf(format, args...))
	}
	t := fv.Type()

	if u, ok := fv.Addr().Interface().(encoding.TextUnmarshaler); ok {
		var text string
		switch v := raw.(type) {
		case string:
			if strings.TrimSpace(v) == "" {
				bad("is empty; remove the line to use the default")
				return
			}
			text = v
		case int64:
			text = strconv.FormatInt(v, 10)
		case float64:
			text = strconv.FormatFloat(v, 'g', -1, 64)
		default:
			bad("must be a string%s, not %s", d.example(t), describe(raw))
			return
		}
		if t == reflect.TypeFor[netip.Addr]() {
			a, err := netip.ParseAddr(text)
			if err != nil {
				msg := fmt.Sprintf("%q is not an IP address (IPv4 like \"1.1.1.1\" or IPv6 like \"2606:4700:4700::1111\")", text)
				if strings.IndexFunc(text, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }) >= 0 && strings.Contains(text, ".") {
					msg = fmt.Sprintf("%q is a host name; write an IP address (macake never resolves names, so shaping never depends on DNS)", text)
				}
				bad("%s", msg)
				return
			}
			fv.Set(reflect.ValueOf(a))
			return
		}
		if err := u.UnmarshalText([]byte(text)); err != nil {
			if t == reflect.TypeFor[HardwareAddr]() {
				bad("%q is not a MAC address (six bytes, e.g. \"74:24:9f:00:00:01\")", text)
				return
			}
			bad("%v", err)
		}
		return
	}

	switch t.Kind() {
	case reflect.Struct:
		if _, ok := raw.(map[string]any); !ok || elem >= 0 {
			bad("must be a table%s, not %s", d.example(t), describe(raw))
			return
		}
		d.decodeStruct(fv, e)
	case reflect.String:
		s, ok := raw.(string)
		switch {
		case !ok:
			bad("must be a string, not %s", describe(raw))
			return
		case strings.TrimSpace(s) == "" && name == "match.interface":
			bad(`is empty; name the interface this policy shapes, e.g. interface = "en0"`)
			return
		case strings.TrimSpace(s) == "":
			bad("is empty; remove the line to use the default")
			return
		}
		fv.SetString(s)
	case reflect.Int:
		switch v := raw.(type) {
		case int64:
			if v < math.MinInt32 || v > math.MaxInt32 {
				bad("%d is out of range", v)
				return
			}
			fv.SetInt(v)
		case float64:
			bad("must be a whole number, not %v", v)
		default:
			bad("must be a whole number, not %s", describe(raw))
		}
	case reflect.Float64:
		switch v := raw.(type) {
		case int64:
			fv.SetFloat(float64(v))
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				bad("must be a finite number, not %v", v)
				return
			}
			fv.SetFloat(v)
		default:
			bad("must be a number, not %s", describe(raw))
		}
	case reflect.Bool:
		b, ok := raw.(bool)
		if !ok {
			bad("must be true or false, not %s", describe(raw))
			return
		}
		fv.SetBool(b)
	case reflect.Slice:
		arr, ok := raw.([]any)
		if !ok || elem >= 0 {
			bad("must be an array, e.g. [\"1.1.1.1\", \"9.9.9.9\"], not %s", describe(raw))
			return
		}
		s := reflect.MakeSlice(t, len(arr), len(arr))
		for i, v := range arr {
			d.decodeValue(s.Index(i), v, e, i)
		}
		fv.Set(s)
	default:
		bad("cannot be decoded (type %s)", t)
	}
}
