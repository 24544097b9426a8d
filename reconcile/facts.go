// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sort"

	"github.com/macake/macake/config"
)

// EnvLinkFacts names the environment variable whose JSON file replaces
// link-fact detection (DESIGN §4), for tests, demos and the emulator.
const EnvLinkFacts = "MACAKE_LINK_FACTS"

// FactsSource produces the current link facts (config.Facts).
//
// Until the sensing package (reconcile/linkfacts) lands, FactsFromEnv
// provides a minimal source: the MACAKE_LINK_FACTS file, else which
// interfaces exist and are up, without gateways or SSIDs.
type FactsSource interface {
	Facts(ctx context.Context) (config.Facts, error)
}

// FactsFromEnv returns the MACAKE_LINK_FACTS file source when the variable
// is set, and the interface detector otherwise.
func FactsFromEnv(getenv func(string) string) FactsSource {
	if path := getenv(EnvLinkFacts); path != "" {
		return FactsFile{Path: path}
	}
	return interfaceFacts{}
}

// FactsFile reads link facts from a JSON file in the config.Facts shape,
// strictly: unknown fields are errors, so a typo never silently matches
// nothing.
type FactsFile struct {
	Path string
}

// Facts reads and decodes the file.
func (f FactsFile) Facts(context.Context) (config.Facts, error) {
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return config.Facts{}, fmt.Errorf("reading link facts (%s): %w", EnvLinkFacts, err)
	}
	facts, err := ParseFacts(b)
	if err != nil {
		return config.Facts{}, fmt.Errorf("link facts %s (%s): %w", f.Path, EnvLinkFacts, err)
	}
	return facts, nil
}

// ParseFacts decodes the MACAKE_LINK_FACTS JSON shape strictly.
func ParseFacts(b []byte) (config.Facts, error) {
	var facts config.Facts
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&facts); err != nil {
		return config.Facts{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return config.Facts{}, fmt.Errorf("unexpected data after the JSON object")
	}
	seen := map[string]bool{}
	for i, fi := range facts.Interfaces {
		switch {
		case fi.Name == "":
			return config.Facts{}, fmt.Errorf("interfaces[%d] has no name", i)
		case seen[fi.Name]:
			return config.Facts{}, fmt.Errorf("interface %q is listed twice", fi.Name)
		}
		seen[fi.Name] = true
	}
	return facts, nil
}

// interfaceFacts lists the system's interfaces and whether each is up and
// running; it knows no gateways or SSIDs, so policies with such match keys
// never match through it.
type interfaceFacts struct{}

func (interfaceFacts) Facts(context.Context) (config.Facts, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return config.Facts{}, fmt.Errorf("listing network interfaces: %w", err)
	}
	var f config.Facts
	for _, ifi := range ifaces {
		if ifi.Flags&net.FlagLoopback != 0 {
			continue
		}
		up := ifi.Flags&net.FlagUp != 0 && ifi.Flags&net.FlagRunning != 0
		f.Interfaces = append(f.Interfaces, config.InterfaceFacts{Name: ifi.Name, Up: up})
	}
	sort.Slice(f.Interfaces, func(i, j int) bool { return f.Interfaces[i].Name < f.Interfaces[j].Name })
	return f, nil
}

// InterfaceMTUs returns the MTU of each named interface that exists here
// (Inputs.MTU); interfaces it cannot find are left out.
func InterfaceMTUs(names []string) map[string]int {
	mtus := map[string]int{}
	for _, n := range names {
		if ifi, err := net.InterfaceByName(n); err == nil && ifi.MTU > 0 {
			mtus[n] = ifi.MTU
		}
	}
	return mtus
}
