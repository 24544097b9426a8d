// SPDX-License-Identifier: Apache-2.0

package config_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
)

// docSections splits a Markdown file into sections by heading line.
func docSections(text string) map[string]string {
	out := map[string]string{}
	heading := ""
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") {
			heading = line
			continue
		}
		out[heading] += line + "\n"
	}
	return out
}

// section returns the body of the first section whose heading contains
// marker.
func section(t *testing.T, sections map[string]string, marker string) string {
	t.Helper()
	for h, body := range sections {
		if strings.Contains(h, marker) {
			return body
		}
	}
	t.Errorf("docs/CONFIG.md has no section headed %s", marker)
	return ""
}

// checkDocumented requires every toml key of t to have a table row
// ("| `key` |") in body; keys of inline tables (min, max, first, last)
// must at least be named in it.
func checkDocumented(t *testing.T, body, where string, typ reflect.Type) {
	t.Helper()
	fields, names := config.TOMLFields(typ)
	for _, n := range names {
		if !strings.Contains(body, "| `"+n+"` |") {
			t.Errorf("docs/CONFIG.md: %s key %q has no row", where, n)
		}
		ft := typ.Field(fields[n]).Type
		if config.IsLeaf(ft) {
			continue
		}
		_, sub := config.TOMLFields(ft)
		for _, s := range sub {
			if !strings.Contains(body, s+" =") && !strings.Contains(body, "`"+s+"`") {
				t.Errorf("docs/CONFIG.md: %s.%s is not described", where, n+"."+s)
			}
		}
	}
}

// TestConfigDocCoversEverySchemaKey fails when a key of the policy file
// or the daemon settings is missing from docs/CONFIG.md.
func TestConfigDocCoversEverySchemaKey(t *testing.T) {
	data, err := os.ReadFile("../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := docSections(string(data))
	policy := reflect.TypeFor[config.Policy]()
	fields, names := config.TOMLFields(policy)
	var top []string
	for _, n := range names {
		ft := policy.Field(fields[n]).Type
		if config.IsLeaf(ft) {
			top = append(top, n)
			continue
		}
		checkDocumented(t, section(t, sections, "`["+n+"]`"), "["+n+"]", ft)
	}
	body := section(t, sections, "Top level")
	for _, n := range top {
		if !strings.Contains(body, "| `"+n+"` |") {
			t.Errorf("docs/CONFIG.md: top-level key %q has no row", n)
		}
	}
	checkDocumented(t, section(t, sections, "`macake.toml`"), "macake.toml", reflect.TypeFor[settings.Daemon]())
}
