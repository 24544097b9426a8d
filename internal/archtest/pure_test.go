// SPDX-License-Identifier: Apache-2.0

package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pure lists the pure cores: every non-test file of the directory, or only
// the named files where a package also holds its driver.
var pure = []struct {
	dir   string
	files []string // nil: every non-test file
	why   string
}{
	{dir: "config", why: "files → policies"},
	{dir: "config/units", why: "the files' value types"},
	{dir: "config/settings", why: "the daemon's settings file"},
	{dir: "shape", why: "the desired state"},
	{dir: "plan", why: "a plan and its rendering"},
	// The Loop (loop.go) drives the control law with timers, its clock
	// injectable (LoopConfig.Now, testing/synctest); the law itself is pure.
	{dir: "controller", why: "the control law", files: except("loop.go")},
	{dir: "controller/tuning", why: "the control law's tunables"},
	{dir: "controller/autoqueue", why: "the automatic queue's size"},
	{dir: "desired", why: "the desired state and matching"},
	{dir: "sense/probe/wire", why: "the probes' packets as bytes"},
}

// except marks a pure entry as every file but these.
func except(names ...string) []string { return append([]string{"!"}, names...) }

// forbiddenImports are packages no pure core may import. Reading its own
// input files is config's job, so os is allowed.
var forbiddenImports = map[string]string{
	"os/exec":  "starts processes (only execrun does)",
	"net/http": "talks to the network",
}

// netPure are the identifiers of package net that only parse or hold
// values; everything else in it opens sockets or asks the system.
var netPure = map[string]bool{
	"HardwareAddr": true, "ParseMAC": true, "SplitHostPort": true, "JoinHostPort": true,
	"AddrError": true, "ParseIP": true, "IP": true, "IPNet": true, "ParseCIDR": true,
}

// clock are the functions of package time that read or wait on the wall
// clock.
var clock = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true,
	"Tick": true, "NewTicker": true, "NewTimer": true,
}

func TestPureCoresTouchNoSystem(t *testing.T) {
	checked := 0
	for _, p := range pure {
		dir := filepath.Join("..", "..", p.dir)
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v): the layout moved; update this test", p.dir, err)
		}
		for _, path := range files {
			name := filepath.Base(path)
			if strings.HasSuffix(name, "_test.go") || !selected(p.files, name) {
				continue
			}
			checked++
			for _, problem := range impurities(t, path) {
				t.Errorf("%s/%s (%s must stay pure): %s", p.dir, name, p.why, problem)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d files checked: the layout moved; update this test", checked)
	}
}

func selected(files []string, name string) bool {
	if files == nil {
		return true
	}
	if files[0] == "!" {
		for _, f := range files[1:] {
			if f == name {
				return false
			}
		}
		return true
	}
	for _, f := range files {
		if f == name {
			return true
		}
	}
	return false
}

// impurities lists what in the file touches the system.
func impurities(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	local := map[string]string{} // local name → import path, for net and time
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if why, bad := forbiddenImports[p]; bad {
			out = append(out, "imports "+p+", which "+why)
		}
		name := filepath.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if p == "net" || p == "time" {
			local[name] = p
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		switch local[x.Name] {
		case "net":
			if !netPure[sel.Sel.Name] {
				out = append(out, "uses net."+sel.Sel.Name+", which talks to the network")
			}
		case "time":
			if clock[sel.Sel.Name] {
				out = append(out, "uses time."+sel.Sel.Name+", the wall clock (inject the time instead)")
			}
		}
		return true
	})
	return out
}

// TestTheCheckCatchesImpurity: the guard itself fails on a file that
// touches the system, so a pass above means something.
func TestTheCheckCatchesImpurity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.go")
	src := "package bad\n\nimport (\n\t\"net\"\n\t\"os/exec\"\n\tclock \"time\"\n)\n\nvar _ = exec.Command\nvar _, _ = net.Dial(\"tcp\", \"x\")\nvar _ = clock.Now()\nvar _ = net.ParseMAC\n"
	if err := writeFile(path, src); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(impurities(t, path), "\n")
	for _, want := range []string{"imports os/exec", "net.Dial", "time.Now"} {
		if !strings.Contains(got, want) {
			t.Errorf("the guard missed %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "ParseMAC") {
		t.Errorf("the guard flags net.ParseMAC, which only parses:\n%s", got)
	}
}
