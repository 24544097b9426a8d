// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFacts(t *testing.T) {
	f, err := ParseFacts([]byte(`{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01","ssid":"STARLINK"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	en0, ok := f.Interface("en0")
	if !ok || !en0.Up || en0.GatewayIP.String() != "192.168.1.1" || en0.GatewayMAC.String() != "74:24:9f:00:00:01" || en0.SSID != "STARLINK" {
		t.Fatalf("parsed %+v", f)
	}
	for in, want := range map[string]string{
		`{"interfaces":[{"name":"en0","upp":true}]}`:                   "unknown field",
		`{"interfaces":[{"name":"en0","gateway_mac":"xx"}]}`:           "MAC",
		`{"interfaces":[{"up":true}]}`:                                 "no name",
		`{"interfaces":[{"name":"en0"},{"name":"en0"}]}`:               "twice",
		`{"interfaces":[]} {}`:                                         "after the JSON",
		`{"interfaces":[{"name":"en0","gateway_ip":"192.168.1.300"}]}`: "192.168.1.300",
	} {
		if _, err := ParseFacts([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFacts(%s): %v, want %q", in, err, want)
		}
	}
}

func TestFactsFromEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "facts.json")
	os.WriteFile(path, []byte(`{"interfaces":[{"name":"en9","up":true}]}`), 0o644)
	f, err := FactsFromEnv(envOf(EnvLinkFacts, path)).Facts(context.Background())
	if err != nil || len(f.Interfaces) != 1 || f.Interfaces[0].Name != "en9" {
		t.Fatalf("file source: %+v, %v", f, err)
	}
	_, err = FactsFromEnv(envOf(EnvLinkFacts, path+".missing")).Facts(context.Background())
	if err == nil || !strings.Contains(err.Error(), EnvLinkFacts) {
		t.Fatalf("a missing file must be an error naming %s: %v", EnvLinkFacts, err)
	}
	// Without the variable the system's interfaces are listed (never
	// loopback).
	f, err = FactsFromEnv(envOf()).Facts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range f.Interfaces {
		if i.Name == "lo" || i.Name == "lo0" {
			t.Errorf("loopback listed: %+v", i)
		}
	}
}

func FuzzParseFacts(f *testing.F) {
	f.Add([]byte(`{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01","ssid":"STARLINK"}]}`))
	f.Add([]byte(`{"interfaces":[{"name":"en0","up":false},{"name":"en5","up":true,"gateway_ip":"fe80::1%en5","default":true}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		facts, err := ParseFacts(b)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, i := range facts.Interfaces {
			if i.Name == "" || seen[i.Name] {
				t.Fatalf("accepted %q with a nameless or duplicate interface", b)
			}
			seen[i.Name] = true
		}
	})
}
