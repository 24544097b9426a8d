// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// tc's JSON is not always a map: the u32 classifier prints one "match" key
// per key of the selector inside the same object. encoding/json would keep
// only the last, so tc output is read into this order-preserving tree that
// keeps every member.

type jkind uint8

const (
	jNull jkind = iota
	jObject
	jArray
	jString
	jNumber
	jBool
)

type jvalue struct {
	kind jkind
	obj  []jmember
	arr  []jvalue
	str  string
	num  json.Number
	b    bool
}

type jmember struct {
	key string
	val jvalue
}

// maxJSONDepth bounds nesting; tc's output nests five or six levels.
const maxJSONDepth = 64

// parseJSONTree reads exactly one JSON value from data.
func parseJSONTree(data []byte) (jvalue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readJSONValue(dec, 0)
	if err != nil {
		return jvalue{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return jvalue{}, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

func readJSONValue(dec *json.Decoder, depth int) (jvalue, error) {
	if depth > maxJSONDepth {
		return jvalue{}, errors.New("JSON nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return jvalue{}, io.ErrUnexpectedEOF
		}
		return jvalue{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := jvalue{kind: jObject}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jvalue{}, err
				}
				key, ok := kt.(string)
				if !ok {
					return jvalue{}, fmt.Errorf("object key is %v, not a string", kt)
				}
				mv, err := readJSONValue(dec, depth+1)
				if err != nil {
					return jvalue{}, err
				}
				v.obj = append(v.obj, jmember{key, mv})
			}
			if _, err := dec.Token(); err != nil {
				return jvalue{}, err
			}
			return v, nil
		case '[':
			v := jvalue{kind: jArray}
			for dec.More() {
				ev, err := readJSONValue(dec, depth+1)
				if err != nil {
					return jvalue{}, err
				}
				v.arr = append(v.arr, ev)
			}
			if _, err := dec.Token(); err != nil {
				return jvalue{}, err
			}
			return v, nil
		}
		return jvalue{}, fmt.Errorf("unexpected %v", t)
	case string:
		return jvalue{kind: jString, str: t}, nil
	case json.Number:
		return jvalue{kind: jNumber, num: t}, nil
	case bool:
		return jvalue{kind: jBool, b: t}, nil
	case nil:
		return jvalue{kind: jNull}, nil
	}
	return jvalue{}, fmt.Errorf("unexpected token %v", tok)
}

// get returns the first member named key.
func (v jvalue) get(key string) (jvalue, bool) {
	for _, m := range v.obj {
		if m.key == key {
			return m.val, true
		}
	}
	return jvalue{}, false
}

// all returns every member named key, in order.
func (v jvalue) all(key string) []jvalue {
	var out []jvalue
	for _, m := range v.obj {
		if m.key == key {
			out = append(out, m.val)
		}
	}
	return out
}

// str returns the string member key, or "" when absent or not a string.
func (v jvalue) getString(key string) string {
	m, ok := v.get(key)
	if !ok || m.kind != jString {
		return ""
	}
	return m.str
}

// getBool returns the boolean member key, false when absent.
func (v jvalue) getBool(key string) bool {
	m, ok := v.get(key)
	return ok && m.kind == jBool && m.b
}

// getInt returns the integer member key. ok is false when it is absent;
// err is set when it is present but not an integer.
func (v jvalue) getInt(key string) (n int64, ok bool, err error) {
	return getNumber(v, key, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) })
}

// getUint returns the unsigned integer member key (a 64-bit kernel
// counter), like getInt.
func (v jvalue) getUint(key string) (n uint64, ok bool, err error) {
	return getNumber(v, key, func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) })
}

// getNumber returns the number member key of v as parse reads it: ok is
// false when it is absent; err is set when it is present but not a
// number parse accepts.
func getNumber[N int64 | uint64](v jvalue, key string, parse func(string) (N, error)) (n N, ok bool, err error) {
	m, found := v.get(key)
	if !found {
		return 0, false, nil
	}
	if m.kind != jNumber {
		return 0, true, fmt.Errorf("%q is not a number", key)
	}
	n, err = parse(string(m.num))
	if err != nil {
		return 0, true, fmt.Errorf("%q: %v", key, err)
	}
	return n, true, nil
}
