// SPDX-License-Identifier: Apache-2.0

package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"

	"github.com/BurntSushi/toml"
	"github.com/macake/macake/config/tomltext"
	"github.com/macake/macake/config/units"
)

// schemaType returns the type of the schema field at path, or nil.
func schemaType(t reflect.Type, path toml.Key) reflect.Type {
	for _, name := range path {
		if t.Kind() != reflect.Struct || isLeaf(t) {
			return nil
		}
		fields, _ := tomlFields(t)
		i, ok := fields[name]
		if !ok {
			return nil
		}
		t = t.Field(i).Type
	}
	return t
}

// unquotedProblem says how to write u: in quotes, with a corrected unit
// when the one written is wrong, or as a plain number when the key takes
// one.
func (d *decoder) unquotedProblem(u tomltext.Unquoted) *Problem {
	name := u.Key
	var t reflect.Type
	if u.TableKnown {
		path := append(append(toml.Key{}, u.Table...), tomltext.SplitKey(u.Key)...)
		name = path.String()
		t = schemaType(d.schema, path)
	}
	at := d.src.At(u.Start)
	msg := fmt.Sprintf("write the value in quotes: %s = %q", u.Key, u.Value)
	switch {
	case t == nil:
	case t == reflect.TypeFor[Overhead]():
		// A number of bytes, unless it is a keyword (which needs quotes).
		if num, _, err := units.SplitNumber(u.Value); err == nil && num != "" {
			msg = fmt.Sprintf("takes a plain number, without a unit or quotes: %s = %s", u.Key, num)
		}
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(u.Value))
		var hint *units.UnitHint
		switch {
		case errors.As(err, &hint):
			msg = fmt.Sprintf("write the value in quotes: %s = %q; %s", u.Key, hint.Fix, hint.Reason)
		case err != nil:
			msg += "; also, " + err.Error()
		}
	case t.Kind() == reflect.Int || t.Kind() == reflect.Float64:
		num, _, _ := units.SplitNumber(u.Value)
		msg = fmt.Sprintf("takes a plain number, without a unit or quotes: %s = %s", u.Key, num)
	}
	return &Problem{File: d.file, Line: at.Line, Col: at.Col, Message: name + ": " + msg}
}
