// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/macake/macake/service"
)

func TestEncodeLayoutAndRoundTrip(t *testing.T) {
	root := Dict{
		{"Label", String("org.example.a&b<c>")},
		{"Args", Array{String("/bin/x"), String(`quote " and ' stay`), String("tab\tand\r\nnewline")}},
		{"Empty", Array{}},
		{"Nested", Dict{{"SuccessfulExit", Bool(false)}, {"On", Bool(true)}}},
		{"EmptyDict", Dict{}},
		{"N", Integer(-42)},
		{"Big", Integer(1 << 62)},
		{"Unicode", String("Zürich ☕ 𝄞")},
	}
	out, err := Encode(root)
	if err != nil {
		t.Fatal(err)
	}
	want := `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>org.example.a&amp;b&lt;c&gt;</string>
	<key>Args</key>
	<array>
		<string>/bin/x</string>
		<string>quote " and ' stay</string>
		<string>tab	and&#13;
newline</string>
	</array>
	<key>Empty</key>
	<array/>
	<key>Nested</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
		<key>On</key>
		<true/>
	</dict>
	<key>EmptyDict</key>
	<dict/>
	<key>N</key>
	<integer>-42</integer>
	<key>Big</key>
	<integer>4611686018427387904</integer>
	<key>Unicode</key>
	<string>Zürich ☕ 𝄞</string>
</dict>
</plist>
`
	if string(out) != want {
		t.Errorf("Encode layout:\n%s\nwant:\n%s", out, want)
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatalf("Decode(Encode(x)): %v", err)
	}
	if !reflect.DeepEqual(back, Value(root)) {
		t.Errorf("round trip changed the tree:\n got %#v\nwant %#v", back, root)
	}
}

func TestEncodeRefusesWhatXMLCannotCarry(t *testing.T) {
	for name, v := range map[string]Value{
		"control character": Dict{{"Label", String("a\x01b")}},
		"invalid UTF-8":     Array{String("\xff")},
		"key with NUL":      Dict{{"a\x00", Bool(true)}},
		"duplicate key":     Dict{{"Label", String("a")}, {"Label", String("b")}},
		"nil value":         Dict{{"Label", nil}},
	} {
		if _, err := Encode(v); err == nil {
			t.Errorf("%s: Encode accepted it", name)
		}
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	const head = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"
	for name, tc := range map[string]struct{ doc, want string }{
		"empty":            {"", "no <plist>"},
		"not xml":          {"hello", "unexpected text"},
		"wrong root":       {head + `<dict/>`, "root element must be <plist>"},
		"no version":       {head + `<plist><dict/></plist>`, `version="1.0"`},
		"wrong version":    {head + `<plist version="2.0"><dict/></plist>`, `version="1.0"`},
		"no value":         {head + `<plist version="1.0"></plist>`, "holds no value"},
		"two values":       {head + `<plist version="1.0"><dict/><dict/></plist>`, "exactly one value"},
		"after plist":      {head + `<plist version="1.0"><dict/></plist><dict/>`, "after </plist>"},
		"unclosed":         {head + `<plist version="1.0"><dict>`, "line 2: not well-formed XML: unexpected EOF"},
		"mismatched tags":  {head + `<plist version="1.0"><dict></array></plist>`, "not well-formed XML"},
		"key without val":  {head + `<plist version="1.0"><dict><key>A</key></dict></plist>`, `key "A" has no value`},
		"key after key":    {head + `<plist version="1.0"><dict><key>A</key><key>B</key><true/></dict></plist>`, "another <key> follows"},
		"value no key":     {head + `<plist version="1.0"><dict><string>x</string></dict></plist>`, "expects <key>"},
		"duplicate key":    {head + `<plist version="1.0"><dict><key>A</key><true/><key>A</key><false/></dict></plist>`, "duplicate key"},
		"bad integer":      {head + `<plist version="1.0"><integer>12x</integer></plist>`, "not a 64-bit decimal"},
		"integer overflow": {head + `<plist version="1.0"><integer>99999999999999999999</integer></plist>`, "not a 64-bit decimal"},
		"true with text":   {head + `<plist version="1.0"><true>yes</true></plist>`, "must be empty"},
		"nested in string": {head + `<plist version="1.0"><string>a<b/></string></plist>`, "cannot contain"},
		"stray text":       {head + `<plist version="1.0"><dict>oops<key>A</key><true/></dict></plist>`, "unexpected text"},
		"unknown element":  {head + `<plist version="1.0"><bool/></plist>`, "unknown plist element"},
		"real":             {head + `<plist version="1.0"><real>1.5</real></plist>`, "not supported"},
		"attribute":        {head + `<plist version="1.0"><string id="x">a</string></plist>`, "no attributes"},
		"bad entity":       {head + `<plist version="1.0"><string>&nope;</string></plist>`, "not well-formed XML"},
	} {
		_, err := Decode([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Decode error = %v, want one containing %q", name, err, tc.want)
		}
	}
}

func TestDecodeNamesTheLine(t *testing.T) {
	doc := "<?xml version=\"1.0\"?>\n<plist version=\"1.0\">\n<dict>\n<key>A</key>\n<integer>x</integer>\n</dict>\n</plist>\n"
	_, err := Decode([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), "line 5") {
		t.Fatalf("error %v does not name line 5", err)
	}
}

// FuzzDecode: Decode never panics, and whatever it accepts survives an
// Encode/Decode round trip unchanged.
func FuzzDecode(f *testing.F) {
	for _, p := range []service.Program{examplesProgram} {
		if b, err := DaemonPlist(p); err == nil {
			f.Add(b)
		}
		if b, err := AgentPlist(p, exampleHome); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`<plist version="1.0"><array><integer> 7 </integer><string>&#13;&amp;</string><dict/></array></plist>`))
	f.Add([]byte(`<plist version="1.0"><dict><key>A</key><key>B</key></dict></plist>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data)
		if err != nil {
			return
		}
		out, err := Encode(v)
		if err != nil {
			t.Fatalf("Decode accepted %q but Encode refused the tree: %v", data, err)
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("Decode refused Encode's output: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(v, again) {
			t.Fatalf("round trip changed the tree:\n%#v\n%#v", v, again)
		}
		if out2, _ := Encode(again); !bytes.Equal(out, out2) {
			t.Fatalf("Encode is not deterministic")
		}
	})
}
