// SPDX-License-Identifier: Apache-2.0

package archtest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/macake/macake/"

// rule forbids the packages matching from (a path inside the module; a
// trailing /... takes the tree) to import, in their non-test files, the
// packages matching any of to, or, with only, any of the module's packages
// but those.
type rule struct {
	from string
	to   []string
	only []string
	why  string
}

// splitFromDaemon is why the jobs moved out of package daemon (issue 23)
// do not import it: the daemon uses them, they serve it and never reach
// up, so none can grow back into the loop.
const splitFromDaemon = "a job split out of the daemon serves it and never reaches up to it"

// directions are the layout's import rules: the folders show the data
// flow (files → policies, the world sensed, decisions, desired state and
// the one reconcile pass, the backends that touch the kernel, the daemon
// that drives them, the CLI on top) and nothing reaches up.
var directions = []rule{
	{from: "backend/...", to: []string{"config", "desired", "reconcile", "session", "state", "daemon/...", "cmd/..."},
		why: "a backend takes neutral settings and stores (backend.Settings, backend.Store), not the policy schema or the state file"},
	{from: "reconcile", to: []string{"backend/pfdn/...", "backend/tc/...", "session", "daemon/...", "cmd/..."},
		why: "the pass works through the backend interface; backends register themselves and session opens the chosen one"},
	{from: "daemon/...", to: []string{"backend/pfdn/...", "backend/tc/...", "cmd/..."},
		why: "the daemon works through the backend interface; cmd/macake links the backends in"},
	{from: "daemon/boundsadvice", to: []string{"daemon"}, why: splitFromDaemon},
	{from: "daemon/configwatch", to: []string{"daemon"}, why: splitFromDaemon},
	{from: "daemon/history", to: []string{"daemon"}, why: splitFromDaemon},
	{from: "daemon/idlertt", to: []string{"daemon"}, why: splitFromDaemon},
	{from: "daemon/linkchanges", to: []string{"daemon"}, why: splitFromDaemon},
	{from: "daemon/measurerecord", to: []string{"daemon"}, why: splitFromDaemon},
	{from: "daemon/pauses", to: []string{"daemon"}, why: splitFromDaemon},
	{from: "daemon/sensors", to: []string{"daemon"}, why: splitFromDaemon},
	{from: "daemon/statusbuild", to: []string{"daemon"}, why: splitFromDaemon},
	{from: "daemon/statusread", to: []string{"daemon"}, why: splitFromDaemon},
	{from: "daemon/watchswitch", to: []string{"daemon"}, why: splitFromDaemon},
	{from: "session", to: []string{"backend/pfdn/...", "backend/tc/...", "reconcile", "daemon/...", "cmd/..."},
		why: "session opens whichever backend is registered"},
	{from: "desired", to: []string{"reconcile", "session", "daemon/...", "cmd/...", "backend/pfdn/...", "backend/tc/...", "sense/measure", "sense/probe"},
		why: "desired is the pure core the pass plans from"},
	{from: "state", to: []string{"desired", "reconcile", "session", "daemon/...", "cmd/...", "backend/pfdn/...", "backend/tc/..."},
		why: "the state directory's files know nothing of who reads them"},
	{from: "controller", only: []string{"controller/tuning", "shape"},
		why: "the control law is a function of its tunables and its samples; it reads no policy"},
	{from: "controller/autoqueue", only: []string{"controller/tuning", "shape"},
		why: "a queue's size is arithmetic on a rate, a round trip and the default MTU"},
	{from: "controller/tuning", only: []string{"config", "shape"},
		why: "the law's tunables map a policy onto the law and know nothing above the policy schema"},
	{from: "doctor", to: []string{"doctor/machine", "sense/probe"},
		why: "the checks reach this machine only through doctor.System, so tests pass fakes; doctor/machine supplies the real seams"},
	{from: "doctor/report", only: []string{"internal/..."},
		why: "a doctor report is data and its printing; what the checks look at is doctor's"},
	{from: "sim/...", to: []string{"daemon/...", "cmd/...", "reconcile", "session"},
		why: "the simulator runs the law offline, never the daemon"},
	{from: "sense/...", to: []string{"reconcile", "desired", "session", "backend/...", "daemon/...", "cmd/..."},
		why: "sensing observes the world; what to do about it is decided above"},
	{from: "sense/probe/wire", only: []string{},
		why: "the probes' packets as bytes depend on nothing of macake's"},
	{from: "config/...", only: []string{"config/...", "shape", "diag", "internal/..."},
		why: "policies are read before anything else exists"},
	{from: "service/...", only: []string{"service/...", "diag", "execrun", "internal/..."},
		why: "installing a service knows the program it runs and the manager's tools, not what the program does"},
	{from: "shape", only: []string{},
		why: "the shared vocabulary depends on nothing"},
	{from: "cmd/macake/internal/exitcode", only: []string{},
		why: "the exit statuses are a contract of their own (DESIGN.md §4) and depend on nothing"},
	{from: "internal/terminal", only: []string{},
		why: "what a terminal can show depends on nothing of macake's"},
	{from: "cmd/macake/internal/shaperun", to: []string{"backend/pfdn/...", "backend/tc/..."},
		why: "a run of apply, plan or down works through the backend interface; package main links the backends in"},
	{from: "cmd/macake/internal/measuretarget", to: []string{"backend/...", "reconcile", "session", "state", "daemon/..."},
		why: "what to measure is decided from the policies and the network alone"},
	{from: "cmd/macake/internal/firstpolicy", to: []string{"backend/...", "reconcile", "session", "state", "daemon/..."},
		why: "init's first policy is drawn from the network and a measurement alone"},
	{from: "cmd/macake/internal/servicerun", only: []string{"service/...", "cmd/macake/internal/exitcode"},
		why: "installing the service knows the program it runs and the manager's tools, not what the program does"},
	{from: "cmd/macake/internal/validation", to: []string{"backend/...", "reconcile", "daemon/..."},
		why: "validate reads the files as a pass would but plans nothing; a kernel's [cake] check is handed in"},
}

func (r rule) matches(pattern, pkg string) bool {
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == tree || strings.HasPrefix(pkg, tree+"/")
	}
	return pkg == pattern
}

// violations lists every import in imports (package → its imports, both
// relative to the module) that breaks a rule.
func violations(rules []rule, imports map[string][]string) []string {
	var out []string
	for pkg, deps := range imports {
		for _, r := range rules {
			if !r.matches(r.from, pkg) {
				continue
			}
			for _, dep := range deps {
				bad := false
				for _, t := range r.to {
					bad = bad || r.matches(t, dep)
				}
				if r.only != nil {
					allowed := false
					for _, o := range r.only {
						allowed = allowed || r.matches(o, dep)
					}
					bad = bad || !allowed
				}
				if bad {
					out = append(out, fmt.Sprintf("%s imports %s: %s", pkg, dep, r.why))
				}
			}
		}
	}
	return out
}

// moduleImports returns each package of the module with the module's
// packages its non-test files import.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("skipping: no go tool on PATH")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		imports[pkg] = nil
		for _, dep := range f[1:] {
			if rel, ok := strings.CutPrefix(dep, module); ok {
				imports[pkg] = append(imports[pkg], rel)
			}
		}
	}
	if len(imports) < 50 {
		t.Fatalf("go list found %d packages: the check sees nothing", len(imports))
	}
	return imports
}

// TestImportsFollowTheDataFlow: no package imports one its folder's rule
// forbids.
func TestImportsFollowTheDataFlow(t *testing.T) {
	imports := moduleImports(t)
	for _, r := range directions {
		found := false
		for pkg := range imports {
			found = found || r.matches(r.from, pkg)
		}
		if !found {
			t.Errorf("no package matches %q: the layout moved; update the rule", r.from)
		}
	}
	for _, v := range violations(directions, imports) {
		t.Error(v)
	}
}

// TestTheDirectionCheckCatchesAViolation: the check itself fails on a
// planted violation of each kind of rule, so a pass above means something.
func TestTheDirectionCheckCatchesAViolation(t *testing.T) {
	imports := moduleImports(t)
	for _, plant := range []struct{ pkg, dep string }{
		{"backend/tc", "config"},
		{"reconcile", "backend/pfdn"},
		{"controller", "sense/probe"},
		{"controller", "config"},
		{"controller/tuning", "daemon"},
		{"controller/autoqueue", "config"},
		{"doctor/report", "state"},
		{"doctor", "sense/probe"},
		{"sense/probe/wire", "shape"},
		{"sense/probe", "reconcile"},
		{"service/systemd", "config"},
		{"daemon/pauses", "daemon"},
		{"cmd/macake/internal/shaperun", "backend/tc"},
		{"internal/terminal", "config"},
	} {
		planted := map[string][]string{}
		for k, v := range imports {
			planted[k] = v
		}
		planted[plant.pkg] = append(append([]string(nil), imports[plant.pkg]...), plant.dep)
		got := violations(directions, planted)
		if len(got) != 1 || !strings.HasPrefix(got[0], plant.pkg+" imports "+plant.dep+":") {
			t.Errorf("planting %s → %s: the check reports %q, want that one import", plant.pkg, plant.dep, got)
		}
	}
}
