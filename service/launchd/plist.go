// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Value is one node of a property list: String, Integer, Bool, Array or
// Dict. Only the types launchd jobs need are modelled; real, date and data
// are refused by Decode rather than silently dropped.
type Value interface{ element() string }

// String is a <string>.
type String string

// Integer is an <integer>.
type Integer int64

// Bool is <true/> or <false/>.
type Bool bool

// Array is an <array>.
type Array []Value

// Dict is a <dict>. It keeps its entries in order, so that rendering is
// deterministic and reads in a deliberate order (Label first), not in Go's
// map order.
type Dict []Entry

// Entry is one key and its value in a Dict.
type Entry struct {
	Key   string
	Value Value
}

// element is the XML element that holds the value in a plist: it makes a
// Value of the five types only, and the encoder writes it.
func (String) element() string  { return "string" }
func (Integer) element() string { return "integer" }
func (Array) element() string   { return "array" }
func (Dict) element() string    { return "dict" }
func (b Bool) element() string {
	if b {
		return "true"
	}
	return "false"
}

// Get returns the value of key, or nil when d has no such key.
func (d Dict) Get(key string) Value {
	for _, e := range d {
		if e.Key == key {
			return e.Value
		}
	}
	return nil
}

// Keys returns d's keys in order.
func (d Dict) Keys() []string {
	keys := make([]string, len(d))
	for i, e := range d {
		keys[i] = e.Key
	}
	return keys
}

const (
	xmlHeader = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"
	doctype   = `<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">` + "\n"
)

// Encode renders root as an XML property list in the layout plutil and Xcode
// write (XML declaration, Apple DOCTYPE, version 1.0, tab indentation). The
// output is a pure function of root. It refuses text that XML 1.0 cannot
// carry (control characters, invalid UTF-8) and duplicate dictionary keys,
// which launchd would resolve unpredictably.
func Encode(root Value) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(xmlHeader)
	b.WriteString(doctype)
	b.WriteString("<plist version=\"1.0\">\n")
	if err := encodeValue(&b, root, 0, "plist"); err != nil {
		return nil, err
	}
	b.WriteString("</plist>\n")
	return b.Bytes(), nil
}

func encodeValue(b *bytes.Buffer, v Value, depth int, where string) error {
	indent := strings.Repeat("\t", depth)
	switch v := v.(type) {
	case String:
		text, err := escapeText(string(v))
		if err != nil {
			return fmt.Errorf("plist %s: %w", where, err)
		}
		fmt.Fprintf(b, "%s<%s>%s</%[2]s>\n", indent, v.element(), text)
	case Integer:
		fmt.Fprintf(b, "%s<%s>%d</%[2]s>\n", indent, v.element(), int64(v))
	case Bool:
		fmt.Fprintf(b, "%s<%s/>\n", indent, v.element())
	case Array:
		return encodeContainer(b, indent, v.element(), len(v), func() error {
			for i, item := range v {
				if err := encodeValue(b, item, depth+1, fmt.Sprintf("%s[%d]", where, i)); err != nil {
					return err
				}
			}
			return nil
		})
	case Dict:
		return encodeContainer(b, indent, v.element(), len(v), func() error {
			seen := make(map[string]bool, len(v))
			for _, e := range v {
				if seen[e.Key] {
					return fmt.Errorf("plist %s: duplicate key %q", where, e.Key)
				}
				seen[e.Key] = true
				key, err := escapeText(e.Key)
				if err != nil {
					return fmt.Errorf("plist %s: key: %w", where, err)
				}
				fmt.Fprintf(b, "%s\t<key>%s</key>\n", indent, key)
				if err := encodeValue(b, e.Value, depth+1, where+"."+e.Key); err != nil {
					return err
				}
			}
			return nil
		})
	case nil:
		return fmt.Errorf("plist %s: missing value", where)
	default:
		return fmt.Errorf("plist %s: unsupported type %T", where, v)
	}
	return nil
}

// encodeContainer writes an array or a dict with members members: when
// empty, as one self-closing element; else members (written by body)
// between the opening and the closing tag.
func encodeContainer(b *bytes.Buffer, indent, element string, members int, body func() error) error {
	if members == 0 {
		fmt.Fprintf(b, "%s<%s/>\n", indent, element)
		return nil
	}
	fmt.Fprintf(b, "%s<%s>\n", indent, element)
	if err := body(); err != nil {
		return err
	}
	fmt.Fprintf(b, "%s</%s>\n", indent, element)
	return nil
}

// escapeText escapes the three characters that matter in XML character
// data, as plutil does (quotes need no escaping outside attributes), and a
// carriage return, which an XML reader would otherwise turn into a newline.
func escapeText(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%q is not valid UTF-8", s)
	}
	for _, r := range s {
		if !isXMLChar(r) {
			return "", fmt.Errorf("%q contains %U, which an XML property list cannot hold", s, r)
		}
	}
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\r", "&#13;").Replace(s), nil
}

// isXMLChar reports whether r may appear in an XML 1.0 document.
func isXMLChar(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' ||
		(r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}

// Decode parses an XML property list strictly, the way `plutil -lint` judges
// one: a single <plist version="1.0"> root holding one value; every <dict>
// alternates <key> and a value with no duplicate keys; <integer> holds a
// 64-bit decimal; <true/> and <false/> are empty; no stray text. Errors name
// the line.
func Decode(data []byte) (Value, error) {
	d := &decoder{x: xml.NewDecoder(bytes.NewReader(data))}
	d.x.Strict = true
	root, err := d.root()
	if err != nil {
		return nil, err
	}
	return root, nil
}

type decoder struct {
	x *xml.Decoder
}

func (d *decoder) errorf(format string, args ...any) error {
	line, _ := d.x.InputPos()
	return fmt.Errorf("plist line %d: %s", line, fmt.Sprintf(format, args...))
}

// xmlError turns an encoding/xml error into one that names the line once.
func (d *decoder) xmlError(err error) error {
	if se, ok := errors.AsType[*xml.SyntaxError](err); ok {
		return fmt.Errorf("plist line %d: not well-formed XML: %s", se.Line, se.Msg)
	}
	return d.errorf("%v", err)
}

// next returns the next start or end element, skipping comments,
// processing instructions, directives and whitespace; other text is an error.
func (d *decoder) next() (xml.Token, error) {
	for {
		tok, err := d.x.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, d.xmlError(err)
		}
		switch t := tok.(type) {
		case xml.StartElement, xml.EndElement:
			return t, nil
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return nil, d.errorf("unexpected text %q", truncate(string(t)))
			}
		}
	}
}

func (d *decoder) root() (Value, error) {
	tok, err := d.next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, d.errorf("empty document: no <plist> element")
		}
		return nil, err
	}
	start, ok := tok.(xml.StartElement)
	if !ok || start.Name.Local != "plist" {
		return nil, d.errorf("root element must be <plist>, got %s", describe(tok))
	}
	version := ""
	for _, a := range start.Attr {
		if a.Name.Local == "version" {
			version = a.Value
		}
	}
	if version != "1.0" {
		return nil, d.errorf(`<plist> must have version="1.0", got %q`, version)
	}
	tok, err = d.next()
	if err != nil {
		return nil, d.eofAsError(err, "<plist> holds no value")
	}
	valueStart, ok := tok.(xml.StartElement)
	if !ok {
		return nil, d.errorf("<plist> holds no value")
	}
	v, err := d.value(valueStart)
	if err != nil {
		return nil, err
	}
	tok, err = d.next()
	if err != nil {
		return nil, d.eofAsError(err, "missing </plist>")
	}
	if end, ok := tok.(xml.EndElement); !ok || end.Name.Local != "plist" {
		return nil, d.errorf("<plist> must hold exactly one value, found another: %s", describe(tok))
	}
	if tok, err := d.next(); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, d.errorf("content after </plist>: %s", describe(tok))
	}
	return v, nil
}

func (d *decoder) eofAsError(err error, msg string) error {
	if errors.Is(err, io.EOF) {
		return d.errorf("%s", msg)
	}
	return err
}

func (d *decoder) value(start xml.StartElement) (Value, error) {
	if len(start.Attr) > 0 {
		return nil, d.errorf("<%s> takes no attributes", start.Name.Local)
	}
	switch start.Name.Local {
	case "string":
		s, err := d.text(start)
		return String(s), err
	case "integer":
		s, err := d.text(start)
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, d.errorf("<integer> %q is not a 64-bit decimal integer", truncate(s))
		}
		return Integer(n), nil
	case "true", "false":
		s, err := d.text(start)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(s) != "" {
			return nil, d.errorf("<%s/> must be empty", start.Name.Local)
		}
		return Bool(start.Name.Local == "true"), nil
	case "array":
		arr := Array{}
		for {
			tok, err := d.next()
			if err != nil {
				return nil, d.eofAsError(err, "unterminated <array>")
			}
			switch t := tok.(type) {
			case xml.EndElement:
				return arr, nil
			case xml.StartElement:
				v, err := d.value(t)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
		}
	case "dict":
		dict := Dict{}
		seen := map[string]bool{}
		for {
			tok, err := d.next()
			if err != nil {
				return nil, d.eofAsError(err, "unterminated <dict>")
			}
			if _, ok := tok.(xml.EndElement); ok {
				return dict, nil
			}
			keyStart := tok.(xml.StartElement)
			if keyStart.Name.Local != "key" {
				return nil, d.errorf("<dict> expects <key>, got <%s>", keyStart.Name.Local)
			}
			key, err := d.text(keyStart)
			if err != nil {
				return nil, err
			}
			if seen[key] {
				return nil, d.errorf("duplicate key %q in <dict>", truncate(key))
			}
			seen[key] = true
			tok, err = d.next()
			if err != nil {
				return nil, d.eofAsError(err, "unterminated <dict>")
			}
			valueStart, ok := tok.(xml.StartElement)
			if !ok {
				return nil, d.errorf("key %q has no value", truncate(key))
			}
			if valueStart.Name.Local == "key" {
				return nil, d.errorf("key %q has no value (another <key> follows)", truncate(key))
			}
			v, err := d.value(valueStart)
			if err != nil {
				return nil, err
			}
			dict = append(dict, Entry{Key: key, Value: v})
		}
	case "real", "date", "data":
		return nil, d.errorf("<%s> is valid in a plist but not used by launchd jobs; not supported", start.Name.Local)
	}
	return nil, d.errorf("unknown plist element <%s>", start.Name.Local)
}

// text reads the character data of a leaf element up to its end tag;
// nested elements are an error.
func (d *decoder) text(start xml.StartElement) (string, error) {
	var b strings.Builder
	for {
		tok, err := d.x.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return "", d.errorf("unterminated <%s>", start.Name.Local)
			}
			return "", d.xmlError(err)
		}
		switch t := tok.(type) {
		case xml.CharData:
			b.Write(t)
		case xml.EndElement:
			return b.String(), nil
		case xml.StartElement:
			return "", d.errorf("<%s> cannot contain <%s>", start.Name.Local, t.Name.Local)
		}
	}
}

func describe(tok xml.Token) string {
	switch t := tok.(type) {
	case xml.StartElement:
		return "<" + t.Name.Local + ">"
	case xml.EndElement:
		return "</" + t.Name.Local + ">"
	}
	return fmt.Sprintf("%T", tok)
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
