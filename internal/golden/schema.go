// SPDX-License-Identifier: Apache-2.0

package golden

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Schema describes the JSON document v's type marshals to, one line per
// field: its path, its JSON type and its Go type, e.g.
//
//	links[].download.rate_bits_per_second  number  int64
//
// A golden file of it (Check) keeps a wire format from changing by
// accident: a renamed, added or retyped field anywhere in the document,
// also in a type it embeds from another package, changes the schema.
func Schema(v any) []byte {
	var lines []string
	walkSchema(reflect.TypeOf(v), "", map[reflect.Type]bool{}, &lines)
	sort.Strings(lines)
	return []byte(strings.Join(lines, "\n") + "\n")
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func walkSchema(t reflect.Type, path string, seen map[reflect.Type]bool, lines *[]string) {
	leaf := func(kind string) {
		*lines = append(*lines, fmt.Sprintf("%s\t%s\t%s", strings.TrimPrefix(path, "."), kind, t))
	}
	if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) {
		leaf("custom")
		return
	}
	if t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		leaf("string")
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		walkSchema(t.Elem(), path, seen, lines)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			leaf("string")
			return
		}
		walkSchema(t.Elem(), path+"[]", seen, lines)
	case reflect.Map:
		walkSchema(t.Elem(), path+"{}", seen, lines)
	case reflect.Struct:
		if seen[t] {
			leaf("recursive")
			return
		}
		seen[t] = true
		defer delete(seen, t)
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" && opts == "" {
				continue
			}
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walkSchema(f.Type, path, seen, lines) // embedded: its fields are this object's
				continue
			}
			if name == "" {
				name = f.Name
			}
			p := path + "." + name
			if opts != "" {
				p += "," + opts
			}
			walkSchema(f.Type, p, seen, lines)
		}
	case reflect.Bool:
		leaf("bool")
	case reflect.String:
		leaf("string")
	case reflect.Interface:
		leaf("any")
	default:
		leaf("number")
	}
}
