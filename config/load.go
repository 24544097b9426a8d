// SPDX-License-Identifier: Apache-2.0

package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/macake/macake/config/tomltext"
	"github.com/macake/macake/internal/fileowner"
	"github.com/macake/macake/internal/safefile"
	"github.com/macake/macake/shape"
)

// Target is the operating system whose backend will apply the policies.
// Some options mean something on one backend only; Load warns about them
// for the target it is given (not the machine it runs on), so that a Linux
// CI can validate files meant for a Mac.
type Target string

// The targets.
const (
	TargetDarwin Target = "darwin" // pf + dummynet
	TargetLinux  Target = "linux"  // tc, with CAKE where the kernel has it
)

// LoadOptions tune Load, LoadFile and settings.LoadDaemon. The zero value
// is the safe one: ownership checks on, target macOS.
type LoadOptions struct {
	// Target selects target-specific warnings; "" means TargetDarwin.
	Target Target
	// SkipOwnershipCheck turns off the root-ownership and mode checks, for
	// tests and for `macake validate` run by a user other than root.
	SkipOwnershipCheck bool
	// Limits are the target backend's (its shaper's largest rate and
	// queue); the zero Limits check only the bounds of every backend.
	Limits shape.Limits
	// Measured, when set, says whether the link has been measured on
	// some network (the state file's profiles; known is false when they
	// cannot be read): a policy with "auto" rates that has not been gets
	// a warning, since plan, apply and watch shape it only where `macake
	// measure` has measured it. validate sets it; apply has its own error.
	Measured func(link string) (measured, known bool)
	// Invocation is how the caller was run, for the commands its warnings
	// name.
	Invocation Invocation
	// CheckCake, when set, tries a valid policy's CAKE options on the
	// running system and returns what it refuses, each at its key: `macake
	// validate` on Linux sets it (the tc backend tries them in a throwaway
	// network namespace), so a refusal is found before an apply.
	CheckCake CakeCheck
	// Context, when set, stops Load between files once it is done (a
	// signal to the command): the directory then has one problem, so
	// that callers keep what they have, as for a directory they cannot
	// read.
	Context context.Context
}

// stopped returns the context's error once it is done.
func (o LoadOptions) stopped() error {
	if o.Context == nil {
		return nil
	}
	return o.Context.Err()
}

func (o LoadOptions) target() Target {
	if o.Target == "" {
		return TargetDarwin
	}
	return o.Target
}

var broadcastV4 = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// Parse decodes and validates one policy file's content. name is the
// file's path: its stem is the link's name, and it prefixes every problem.
// It returns the link, the warnings, and nil or an error holding one
// *Problem per problem (see Problems). It never panics, whatever data holds.
func Parse(name string, data []byte, opts LoadOptions) (Link, []Warning, error) {
	var probs problemList
	link, _ := parseInto(&probs, name, data, opts)
	if err := probs.err(nil); err != nil {
		return Link{}, probs.sortedWarnings(nil), err
	}
	return link, probs.sortedWarnings(nil), nil
}

// parseInto is Parse that adds its problems to probs. It returns the link
// even when there are problems (the cross-file checks still use it), and
// the decoder, which knows the file's positions; that is nil when the file
// is not TOML at all.
func parseInto(probs *problemList, name string, data []byte, opts LoadOptions) (Link, *decoder) {
	link := Link{Name: LinkName(name), File: name}
	if !linkNameRE.MatchString(link.Name) {
		probs.add(name, tomltext.Pos{Line: 1, Col: 1}, "link name %q (from the file name) must be lower-case letters, digits, - and _, starting with a letter or digit, at most 32 characters; rename the file", link.Name)
	}
	if len(data) > MaxFileSize {
		probs.add(name, tomltext.Pos{}, "is %d bytes; a policy file is at most %d", len(data), MaxFileSize)
		return link, nil
	}
	d := newDecoder(name, probs, reflect.TypeFor[Policy]())
	defer d.finish()
	if !d.parseTOML(string(data)) {
		return link, nil
	}
	link.Policy = DefaultPolicy()
	d.decodeStruct(reflect.ValueOf(&link.Policy).Elem(), d.root)
	applyLaw(&link.Policy, d.given)
	d.validatePolicy(&link.Policy, opts.target())
	d.checkLimits(&link.Policy, opts.Limits)
	d.checkMeasured(link, opts)
	if opts.CheckCake != nil && len(probs.problems) == d.mark {
		d.checkCakeOnSystem(link, opts.CheckCake)
	}
	return link, d
}

// checkMeasured warns about "auto" rates that wait for a measurement no
// network of the link has had (LoadOptions.Measured).
func (d *decoder) checkMeasured(l Link, opts LoadOptions) {
	if opts.Measured == nil || l.Shaper.Mode == ModeOff {
		return
	}
	var keys []string
	for _, dir := range []shape.Direction{shape.Download, shape.Upload} {
		if l.Shaper.Rate(dir).Auto {
			keys = append(keys, "shaper."+dir.String())
		}
	}
	measured, known := opts.Measured(l.Name)
	if len(keys) == 0 || measured {
		return
	}
	verb := "is"
	if len(keys) > 1 {
		verb = "are"
	}
	msg := fmt.Sprintf("%s %s \"auto\": plan, apply and watch shape link %q only on a network %q has measured, and it has measured none yet",
		strings.Join(keys, " and "), verb, l.Name, opts.Invocation.Command(true, "measure", "--link", l.Name))
	if !known {
		msg = fmt.Sprintf("%s %s \"auto\": plan, apply and watch shape link %q only on a network %q has measured (this user cannot read the state file, which says where it was)",
			strings.Join(keys, " and "), verb, l.Name, opts.Invocation.Command(true, "measure", "--link", l.Name))
	}
	d.warnAt(keys[0], "%s", msg)
}

// LinkName is a policy file's link name, its stem:
// "links.d/starlink.toml" → "starlink".
func LinkName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".toml")
}

// LoadFile reads and validates one policy file, e.g. for `macake sim
// --policy FILE`. Ownership is checked unless opts say otherwise.
func LoadFile(path string, opts LoadOptions) (Link, []Warning, error) {
	var probs problemList
	data, ok := readPolicy(&probs, path, opts)
	if !ok {
		return Link{}, nil, probs.err(nil)
	}
	return Parse(path, data, opts)
}

// readPolicy reads a regular file and checks its ownership, reporting
// problems. A named pipe or a device is refused without being opened (a
// FIFO named x.toml would block the read forever).
func readPolicy(probs *problemList, path string, opts LoadOptions) ([]byte, bool) {
	data, info, err := safefile.Read(path, MaxFileSize)
	var notRegular *safefile.NotRegularError
	switch {
	case errors.As(err, &notRegular):
		probs.add(path, tomltext.Pos{}, "is %s, not a regular file: macake reads only regular files", safefile.Kind(notRegular.Type))
		return nil, false
	case errors.Is(err, safefile.ErrTooLarge):
		probs.add(path, tomltext.Pos{}, "is larger than %d bytes, the most a policy or settings file may be", MaxFileSize)
		return nil, false
	case err != nil:
		probs.add(path, tomltext.Pos{}, "cannot read: %v", unwrapPathError(err))
		return nil, false
	}
	if !opts.SkipOwnershipCheck {
		if msg := unsafeOwnership(path, info); msg != "" {
			probs.add(path, tomltext.Pos{}, "%s", msg)
			return nil, false
		}
	}
	return data, true
}

// linkOutside explains why the entry at path, in the policy directory
// dir, must not be read because it is a symbolic link that leads out of
// dir, or returns "". Through such a link root would read any file on the
// system and quote bits of it in its messages (a password file's lines
// read as keys). What the link points to is said; what it holds is not.
func linkOutside(dir, path string) string {
	info, err := os.Lstat(path)
	if err != nil || info.Mode().Type() != fs.ModeSymlink {
		return ""
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Sprintf("is a symbolic link that cannot be followed: %v", unwrapPathError(err))
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Sprintf("cannot resolve the directory: %v", unwrapPathError(err))
	}
	if rel, err := filepath.Rel(realDir, target); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Sprintf("is a symbolic link to %q, outside %s; macake reads only files inside the policy directory: copy the file here instead of linking it", target, dir)
	}
	return ""
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ignored reports whether a directory entry is not a policy file: not
// *.toml, hidden, or an editor's leftover.
func ignored(name string) bool {
	return !strings.HasSuffix(name, ".toml") || strings.HasPrefix(name, ".") ||
		strings.HasSuffix(name, "~") || strings.HasSuffix(name, ".swp")
}

// Load reads every policy file in dir (only *.toml; hidden files and
// editor leftovers such as .#x.toml, x.toml~ and .x.toml.swp are ignored),
// in lexical order, and validates each file and the set of them.
//
// It returns the valid links, the warnings, and nil or an error that holds
// every problem of every file, one *Problem each (see Problems); its text
// is one "FILE:LINE:COL: message" line per problem. Links whose file has a
// problem are left out, so callers that must carry on (watch) can use the
// rest. Unless opts.SkipOwnershipCheck is set, dir and each file must be
// owned by root and not writable by group or others, as ssh requires of
// its keys; otherwise they are refused.
func Load(dir string, opts LoadOptions) ([]Link, []Warning, error) {
	var probs problemList
	order := map[string]int{}
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		probs.add(dir, tomltext.Pos{}, "no such directory (create it: sudo mkdir -p %s)", dir)
		return nil, nil, probs.err(order)
	case err != nil:
		probs.add(dir, tomltext.Pos{}, "cannot read: %v", unwrapPathError(err))
		return nil, nil, probs.err(order)
	case !info.IsDir():
		probs.add(dir, tomltext.Pos{}, "is not a directory")
		return nil, nil, probs.err(order)
	}
	if !opts.SkipOwnershipCheck {
		msg := unsafeOwnership(dir, info)
		if msg == "" {
			msg = unsafeAncestor(dir)
		}
		if msg != "" {
			probs.add(dir, tomltext.Pos{}, "%s", msg)
			return nil, nil, probs.err(order)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		probs.add(dir, tomltext.Pos{}, "cannot list: %v", unwrapPathError(err))
		return nil, nil, probs.err(order)
	}
	var names []string
	for _, e := range entries {
		if !ignored(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)

	var parsed []parsedLink
	for i, n := range names {
		if err := opts.stopped(); err != nil {
			probs.add(dir, tomltext.Pos{}, "reading stopped after %d of %d files: %v", i, len(names), err)
			return nil, nil, probs.err(order)
		}
		path := filepath.Join(dir, n)
		order[path] = i
		if msg := linkOutside(dir, path); msg != "" {
			probs.add(path, tomltext.Pos{}, "%s", msg)
			continue
		}
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			probs.warn(path, tomltext.Pos{}, "is a directory; skipped")
			continue
		}
		data, ok := readPolicy(&probs, path, opts)
		if !ok {
			continue
		}
		if link, d := parseInto(&probs, path, data, opts); d != nil {
			parsed = append(parsed, parsedLink{link, d})
		}
	}
	checkIndistinguishable(&probs, parsed)

	bad := map[string]bool{}
	for _, p := range probs.problems {
		bad[p.File] = true
	}
	var links []Link
	for _, p := range parsed {
		if !bad[p.link.File] {
			links = append(links, p.link)
		}
	}
	return links, probs.sortedWarnings(order), probs.err(order)
}

// parsedLink is a link with the decoder that knows its file's positions.
type parsedLink struct {
	link Link
	dec  *decoder
}

// checkIndistinguishable reports pairs of links that can never be told
// apart: the same interface, the same match keys and the same priority.
// Matching would always pick the same one of them (by name), so the other
// is dead weight, and certainly not what the author meant.
func checkIndistinguishable(probs *problemList, links []parsedLink) {
	for j := range links {
		for i := range j {
			a, b := links[i].link, links[j].link
			if !Indistinguishable(a.Match, b.Match) {
				continue
			}
			at := links[j].dec.keyPosOf("match")
			probs.add(b.File, at, "link %q cannot be told apart from %q (%s): same [match] keys and priority; make the match keys differ or give one a higher priority",
				b.Name, a.Name, a.File)
		}
	}
}

// Indistinguishable reports whether two policies' match keys can never be
// told apart: the same interface (one is named), the same network keys and
// the same priority.
func Indistinguishable(a, b MatchKeys) bool {
	return a.Interface != "" && a.Interface == b.Interface && a.GatewayMAC.Equal(b.GatewayMAC) &&
		a.GatewayIP == b.GatewayIP && a.SSID == b.SSID && a.Priority == b.Priority
}

// unsafeAncestor explains why the directories above path (the config
// directory or the settings file) must not be trusted, or returns "":
// whoever can write one of them can swap in files of their own
// (fileowner.UnsafeAncestor).
func unsafeAncestor(path string) string {
	if d, problem := fileowner.UnsafeAncestor(path); d != "" {
		return fmt.Sprintf("refusing to use: %s, above it, is %s, so another user could put their own files in its place; fix: sudo chown root %s && sudo chmod go-w %s", d, problem, d, d)
	}
	return ""
}

// unsafeOwnership explains why a config file or directory must not be
// trusted, or returns "".
func unsafeOwnership(path string, info fs.FileInfo) string {
	if uid, _, ok := fileowner.Of(info); ok && uid != 0 {
		return fmt.Sprintf("refusing to use: owned by uid %d, not root; fix: sudo chown root %s", uid, path)
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Sprintf("refusing to use: writable by group or others (mode %04o); fix: sudo chmod go-w %s", perm, path)
	}
	return ""
}
