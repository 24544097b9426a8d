// SPDX-License-Identifier: Apache-2.0

package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
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
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("skipping: no go tool on PATH")
	}
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command("go", "list", "-deps", "github.com/macake/macake/cmd/macake")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=arm64", "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (%s): %v", goos, err)
		}
		deps := strings.Fields(string(out))
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
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("skipping: no go tool on PATH")
	}
	const pkg = "github.com/macake/macake/cmd/macake/internal/shaperun"
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, backend := range []string{"github.com/macake/macake/backend/pfdn", "github.com/macake/macake/backend/tc"} {
			if dep == backend || strings.HasPrefix(dep, backend+"/") {
				t.Errorf("%s links %s: hand what needs it in from package main (shaperun.Env)", pkg, dep)
			}
		}
	}
}
