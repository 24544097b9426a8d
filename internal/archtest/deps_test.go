// SPDX-License-Identifier: Apache-2.0

package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// unlinked are packages (a trailing / for a whole tree) that must not be
// linked into macake, with the reason. Every linked package is
// initialised, and its code paged in, in every run of the one binary,
// `macake watch` included, used or not (docs/MEASUREMENTS.md, "Memory").
var unlinked = map[string]string{
	"github.com/prometheus/":      "the metrics are written in the text format by package metrics: the client library and protobuf cost the daemon 2.7 MiB resident",
	"google.golang.org/protobuf/": "linked only through the Prometheus client",
	"testing":                     "test helpers the binary links (pfdntest) take an interface instead",
}

// TestTheBinaryLinksNoHeavyPackage: macake, for Linux and for macOS,
// links none of the packages above.
func TestTheBinaryLinksNoHeavyPackage(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		deps := linked(t, "github.com/macake/macake/cmd/macake", goos)
		if len(deps) < 100 {
			t.Fatalf("go list (%s) listed %d packages: the check sees nothing", goos, len(deps))
		}
		for _, dep := range deps {
			for bad, why := range unlinked {
				if dep == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(dep, bad)) {
					t.Errorf("macake for %s links %s: %s", goos, dep, why)
				}
			}
		}
	}
}

// linked is every package pkg links when built for goos (arm64, no cgo),
// pkg itself included, as `go list -deps` lists them; the test skips
// without a go tool and fails when the list does not name pkg.
func linked(t *testing.T, pkg, goos string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("skipping: no go tool on PATH")
	}
	cmd := exec.Command("go", "list", "-deps", pkg)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s (%s): %v", pkg, goos, err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, pkg) {
		t.Fatalf("go list -deps %s (%s) does not list the package itself: the check sees nothing", pkg, goos)
	}
	return deps
}

// TestNoRegexpCompiledAtStart: no package macake links compiles a regexp
// in a package variable, which would run at every start of every command
// (lazyregexp compiles at first use instead).
func TestNoRegexpCompiledAtStart(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("skipping: no go tool on PATH")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.Dir}}{{range .GoFiles}} {{.}}{{end}}`, "github.com/macake/macake/cmd/macake").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[0], root+string(filepath.Separator)) {
			continue // not macake's own
		}
		for _, name := range f[1:] {
			checked++
			path := filepath.Join(f[0], name)
			file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range file.Decls {
				g, ok := decl.(*ast.GenDecl)
				if !ok || g.Tok != token.VAR {
					continue
				}
				ast.Inspect(g, func(n ast.Node) bool {
					sel, ok := n.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if x, isIdent := sel.X.(*ast.Ident); isIdent && x.Name == "regexp" && strings.Contains(sel.Sel.Name, "Compile") {
						rel, _ := filepath.Rel(root, path)
						t.Errorf("%s: a package variable calls regexp.%s at start-up; use lazyregexp.New", rel, sel.Sel.Name)
					}
					return true
				})
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d files checked: the check sees nothing", checked)
	}
}

// TestRunsLinkNoConcreteBackend: a run of apply, plan or down
// (shaperun) reaches the backends through the interface alone, not even
// through a package it imports: package main hands in what needs them
// (the selftest leftovers' clean-up). The import table checks direct
// imports only; this checks everything the package links.
func TestRunsLinkNoConcreteBackend(t *testing.T) {
	const pkg = "github.com/macake/macake/cmd/macake/internal/shaperun"
	for _, goos := range []string{"linux", "darwin"} {
		for _, dep := range linked(t, pkg, goos) {
			for _, backend := range []string{"github.com/macake/macake/backend/pfdn", "github.com/macake/macake/backend/tc"} {
				if dep == backend || strings.HasPrefix(dep, backend+"/") {
					t.Errorf("%s links %s for %s: hand what needs it in from package main (shaperun.Env)", pkg, dep, goos)
				}
			}
		}
	}
}
