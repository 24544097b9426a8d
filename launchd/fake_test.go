// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/macake/macake/plan"
)

// fakeFile is one entry of fakeFiles.
type fakeFile struct {
	data     []byte
	mode     fs.FileMode
	uid, gid int
	dir      bool
}

// fakeFiles is an in-memory file system with owners. Writes need the parent
// directory to exist, as on a real one.
type fakeFiles struct {
	files map[string]*fakeFile
	// uid and gid own what is created with Owner -1 (the acting user).
	uid, gid int
}

func newFakeFiles(dirs ...string) *fakeFiles {
	f := &fakeFiles{files: map[string]*fakeFile{"/": {dir: true, mode: fs.ModeDir | 0o755}}, uid: 0, gid: 0}
	for _, d := range dirs {
		f.MkdirAll(d, 0o755, RootWheel)
	}
	return f
}

func (f *fakeFiles) Stat(path string) (FileInfo, error) {
	e, ok := f.files[filepath.Clean(path)]
	if !ok {
		return FileInfo{}, &fs.PathError{Op: "stat", Path: path, Err: fs.ErrNotExist}
	}
	return FileInfo{Mode: e.mode, UID: e.uid, GID: e.gid, IsDir: e.dir}, nil
}

func (f *fakeFiles) ReadFile(path string) ([]byte, error) {
	e, ok := f.files[filepath.Clean(path)]
	if !ok || e.dir {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return append([]byte(nil), e.data...), nil
}

func (f *fakeFiles) owner(o Owner) (int, int) {
	if o.UID < 0 {
		return f.uid, f.gid
	}
	return o.UID, o.GID
}

func (f *fakeFiles) WriteFile(path string, data []byte, perm fs.FileMode, o Owner) error {
	if p, ok := f.files[filepath.Dir(path)]; !ok || !p.dir {
		return &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	uid, gid := f.owner(o)
	f.files[filepath.Clean(path)] = &fakeFile{data: append([]byte(nil), data...), mode: perm, uid: uid, gid: gid}
	return nil
}

func (f *fakeFiles) MkdirAll(path string, perm fs.FileMode, o Owner) error {
	path = filepath.Clean(path)
	if e, ok := f.files[path]; ok {
		if !e.dir {
			return fmt.Errorf("mkdir %s: not a directory", path)
		}
		return nil
	}
	if err := f.MkdirAll(filepath.Dir(path), perm, o); err != nil {
		return err
	}
	uid, gid := f.owner(o)
	f.files[path] = &fakeFile{dir: true, mode: fs.ModeDir | perm, uid: uid, gid: gid}
	return nil
}

func (f *fakeFiles) Remove(path string) error {
	if _, ok := f.files[filepath.Clean(path)]; !ok {
		return &fs.PathError{Op: "remove", Path: path, Err: fs.ErrNotExist}
	}
	delete(f.files, filepath.Clean(path))
	return nil
}

// fakeLaunchd answers launchctl the way the reference describes it: print
// exits 113 for an unknown service; bootstrap of a loaded job or of a plist
// it rejects exits 5 (EIO); bootout of an unknown job exits 113.
type fakeLaunchd struct {
	files *fakeFiles
	// loaded maps a service target to the plist bytes launchd read.
	loaded map[string][]byte
	// noGUI makes every gui/ domain missing (an ssh-only session).
	noGUI bool
	// lingerPrints keeps a booted-out job visible to this many prints.
	lingerPrints int
	lingering    string
	// override answers a subcommand with a fixed result, n times (-1: always).
	override map[string]overrideResult
	calls    []string
}

type overrideResult struct {
	res plan.Result
	n   int
}

func newFakeLaunchd(files *fakeFiles) *fakeLaunchd {
	return &fakeLaunchd{files: files, loaded: map[string][]byte{}, override: map[string]overrideResult{}}
}

func (l *fakeLaunchd) fail(sub string, code int, msg string, n int) {
	l.override[sub] = overrideResult{res: plan.Result{ExitCode: code, Stderr: []byte(msg + "\n")}, n: n}
}

func exit(code int, stderr string) (plan.Result, error) {
	return plan.Result{ExitCode: code, Stderr: []byte(stderr)}, nil
}

func (l *fakeLaunchd) Run(ctx context.Context, cmd plan.Command) (plan.Result, error) {
	l.calls = append(l.calls, strings.Join(cmd.Argv, " "))
	if cmd.Argv[0] != Launchctl || len(cmd.Argv) < 3 {
		return plan.Result{}, fmt.Errorf("fake launchd: unexpected command %q", cmd.Argv)
	}
	sub, arg := cmd.Argv[1], cmd.Argv[len(cmd.Argv)-1]
	if o, ok := l.override[sub]; ok && o.n != 0 {
		o.n--
		l.override[sub] = o
		return o.res, nil
	}
	domainOf := func(target string) string { return target[:strings.LastIndex(target, "/")] }
	if l.noGUI && strings.HasPrefix(cmd.Argv[2], "gui/") {
		if sub == "bootstrap" {
			return exit(125, "Bootstrap failed: 125: Domain does not support specified action\n")
		}
		return exit(113, "Could not find domain for user gui: 501\n")
	}
	switch sub {
	case "print":
		if _, ok := l.loaded[arg]; ok || (l.lingering == arg && l.lingerPrints > 0) {
			if l.lingering == arg && l.lingerPrints > 0 {
				l.lingerPrints--
			}
			return plan.Result{Stdout: []byte(arg + " = {\n\tstate = running\n}\n")}, nil
		}
		return exit(113, fmt.Sprintf("Bad request.\nCould not find service %q in domain for %s\n", arg[strings.LastIndex(arg, "/")+1:], domainOf(arg)))
	case "enable":
		return plan.Result{}, nil
	case "bootstrap":
		domain := cmd.Argv[2]
		data, err := l.files.ReadFile(arg)
		if err != nil {
			return exit(5, "Bootstrap failed: 5: Input/output error\n")
		}
		v, err := Decode(data)
		d, _ := v.(Dict)
		label, _ := d.Get("Label").(String)
		if err != nil || label == "" {
			return exit(5, "Bootstrap failed: 5: Input/output error\n")
		}
		target := domain + "/" + string(label)
		if _, ok := l.loaded[target]; ok || l.lingering == target && l.lingerPrints > 0 {
			return exit(5, "Bootstrap failed: 5: Input/output error\n")
		}
		l.loaded[target] = data
		return plan.Result{}, nil
	case "bootout":
		if _, ok := l.loaded[arg]; !ok {
			return exit(113, "Boot-out failed: 113: Could not find specified service\n")
		}
		delete(l.loaded, arg)
		if l.lingerPrints > 0 {
			l.lingering = arg
		}
		return plan.Result{}, nil
	case "kickstart":
		if _, ok := l.loaded[arg]; !ok {
			return exit(113, fmt.Sprintf("Could not find service %q in domain for %s\n", arg, domainOf(arg)))
		}
		return plan.Result{}, nil
	}
	return exit(64, "Unrecognized subcommand: "+sub)
}
