// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// TokenStore keeps the pf enable token between runs. The reconciler backs
// it with the state file (state.State.PFToken), saving it atomically;
// SetPFToken and SetEnableIntent must not return before the change is
// durable, or a crash would leak a pf reference.
type TokenStore interface {
	// PFToken returns the held token, "" for none.
	PFToken() string
	// SetPFToken records token ("" to forget it) and forgets any
	// EnableIntent in the same write: the intent is resolved.
	SetPFToken(token string) error
	// EnableIntent returns the intent recorded before a `pfctl -E` whose
	// token was never saved, if any.
	EnableIntent() (EnableIntent, bool)
	// SetEnableIntent records in (nil forgets it).
	SetEnableIntent(in *EnableIntent) error
}

// MemoryTokens is a TokenStore in memory, for tests and one-shot runs.
// The zero value holds no token.
type MemoryTokens struct {
	mu     sync.Mutex
	token  string
	intent *EnableIntent
}

// PFToken implements TokenStore.
func (m *MemoryTokens) PFToken() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token
}

// SetPFToken implements TokenStore.
func (m *MemoryTokens) SetPFToken(token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.token = token
	m.intent = nil
	return nil
}

// EnableIntent implements TokenStore.
func (m *MemoryTokens) EnableIntent() (EnableIntent, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.intent == nil {
		return EnableIntent{}, false
	}
	return *m.intent, true
}

// SetEnableIntent implements TokenStore.
func (m *MemoryTokens) SetEnableIntent(in *EnableIntent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if in != nil {
		c := *in
		c.Before = slices.Clone(in.Before)
		in = &c
	}
	m.intent = in
	return nil
}

// Backend drives pfctl and dnctl. It holds no state of its own besides the
// token store, so every Plan observes the system afresh. Its methods are
// safe to call concurrently if the Runner and TokenStore are.
type Backend struct {
	opts   Options
	run    execrun.Runner
	tokens TokenStore
	// now stamps EnableIntents (time.Now; synctest fakes it in tests).
	now func() time.Time
}

// New returns a Backend that runs commands through run (execrun.Exec on a
// Mac, the pfdntest emulator in tests) and keeps the pf token in tokens.
func New(run execrun.Runner, tokens TokenStore, opts Options) (*Backend, error) {
	if run == nil || tokens == nil {
		return nil, errors.New("pfdn: New needs a runner and a token store")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Backend{opts: opts, run: run, tokens: tokens, now: time.Now}, nil
}

// Options returns the backend's options.
func (b *Backend) Options() Options { return b.opts }

// Observe reads the live state with five read-only calls: the main
// ruleset's dummynet rules, the anchor's, pf's status, its references, and
// the dummynet listing; within a pass (backend.WithLiveReading) once,
// until an op is carried out.
func (b *Backend) Observe(ctx context.Context) (Live, error) {
	return backend.ReadLive(ctx, b.observe)
}

func (b *Backend) observe(ctx context.Context) (Live, error) {
	var live Live
	o := b.opts
	res, err := b.read(ctx, o.Pfctl, "-s", "dummynet")
	if err != nil {
		return Live{}, err
	}
	if live.Main, err = ParseRules(res.Stdout, res.Stderr); err != nil {
		return Live{}, fmt.Errorf("reading the main ruleset: %w", err)
	}
	if res, err = b.read(ctx, o.Pfctl, "-a", o.Anchor, "-s", "dummynet"); err != nil {
		return Live{}, err
	}
	if live.Anchor, err = ParseRules(res.Stdout, res.Stderr); err != nil {
		return Live{}, fmt.Errorf("reading anchor %q: %w", o.Anchor, err)
	}
	if res, err = b.read(ctx, o.Pfctl, "-s", "info"); err != nil {
		return Live{}, err
	}
	if live.Info, err = ParseInfo(res.Stdout, res.Stderr); err != nil {
		return Live{}, fmt.Errorf("reading pf status: %w", err)
	}
	if res, err = b.read(ctx, o.Pfctl, "-s", "References"); err != nil {
		return Live{}, err
	}
	if live.References, live.ReferenceWarnings, err = ParseReferences(res.Stdout, res.Stderr); err != nil {
		return Live{}, fmt.Errorf("reading pf references: %w", err)
	}
	if res, err = b.read(ctx, o.Dnctl, "list"); err != nil {
		return Live{}, err
	}
	if live.Dummynet, err = ParseDummynet(res.Stdout); err != nil {
		return Live{}, fmt.Errorf("reading dummynet pipes: %w", err)
	}
	return live, nil
}

// Plan observes the live system and returns the ordered ops that make it
// match desired. Only owned objects appear; foreign ones produce warnings.
// When desired shapes something but pf's main ruleset lacks the hook line,
// Plan returns the plan together with a *backend.BlockedError (see
// CheckHook), so a dry run can still show it while apply refuses.
// Plan may be called any number of times; it never changes the system.
func (b *Backend) Plan(ctx context.Context, desired shape.State) (plan.Plan, error) {
	d, live, err := b.observed(ctx, desired)
	if err != nil {
		return plan.Plan{}, err
	}
	p := Diff(d, live, b.heldToken(&live))
	return p, CheckHook(d, live)
}

// heldToken is the token macake holds, after resolving an EnableIntent an
// interrupted run left: a recovered token is adopted (and saved when the
// store can save; a run that cannot, such as a dry run as a user, still
// plans with it, and the intent stays for the next run). A warning about
// a token that cannot be told apart from another tool's goes into live.
func (b *Backend) heldToken(live *Live) string {
	held := b.tokens.PFToken()
	in, pending := b.tokens.EnableIntent()
	if !pending {
		return held
	}
	tok, warning := recoverIntent(in, *live, b.now())
	if warning != "" {
		live.ReferenceWarnings = append(live.ReferenceWarnings, warning)
	}
	switch {
	case tok != "" && !live.HoldsToken(held):
		// The held token (if any) is stale: the one pfctl took is macake's.
		b.tokens.SetPFToken(tok)
		return tok
	case tok == "" && warning == "":
		// pfctl -E never ran, or pf dropped what it took: nothing leaked.
		b.tokens.SetEnableIntent(nil)
	}
	return held
}

// observed renders desired, with the state file's slots as ownership
// evidence, and reads the live state to plan it against.
func (b *Backend) observed(ctx context.Context, desired shape.State) (Desired, Live, error) {
	d, err := Render(desired, b.opts)
	if err != nil {
		return Desired{}, Live{}, err
	}
	if b.opts.KnownLinks != nil {
		d.KnownLinks = b.opts.KnownLinks()
	}
	live, err := b.Observe(ctx)
	return d, live, err
}

// PlanUnobserved is Plan against a system where macake owns nothing,
// without reading anything: every object macake would own for desired,
// for a dry run by a user who may not read pf and dummynet (backend.ErrNeedsRoot).
// It knows nothing of the live state, so it cannot check the hook line
// or warn about other tools.
func (b *Backend) PlanUnobserved(desired shape.State) (plan.Plan, error) {
	d, err := Render(desired, b.opts)
	if err != nil {
		return plan.Plan{}, err
	}
	return Diff(d, Live{}, ""), nil
}

// Execute runs one op's commands in order and stops at the first failure.
// It may be called again after a failure (a later Plan shows what is left).
// Benign outcomes of the reference's exit-status table are not errors:
// deleting a pipe that is already gone, releasing a pf reference that pf
// already dropped. Errors wrap an *execrun.Error carrying the argv, the exit
// code and stderr.
func (b *Backend) Execute(ctx context.Context, op plan.Op) error {
	defer backend.ForgetLiveReading(ctx)
	if op.Kind == KindPFReference && op.Action == plan.Create {
		if err := b.recordIntent(ctx); err != nil {
			return fmt.Errorf("%s: %w", op.Label, err)
		}
	}
	for _, cmd := range op.Commands {
		res, err := b.runOne(ctx, cmd)
		if err != nil {
			return fmt.Errorf("%s: %w", op.Label, err)
		}
		if err := b.interpret(op, cmd, res); err != nil {
			return fmt.Errorf("%s: %w", op.Label, err)
		}
	}
	return nil
}

func (b *Backend) interpret(op plan.Op, cmd execrun.Command, res execrun.Result) error {
	fail := func() error { return &execrun.Error{Argv: cmd.Argv, ExitCode: res.ExitCode, Stderr: res.Stderr} }
	switch {
	case op.Kind == KindPipe && op.Action == plan.Remove:
		// A missing pipe answers EINVAL, exit 1: already gone.
		if res.ExitCode == 0 || res.ExitCode == 1 && bytes.Contains(res.Stderr, []byte(msgPipeMissing)) {
			return nil
		}
		return fail()
	case op.Kind == KindPFReference && op.Action == plan.Create:
		// A token on stderr means pf took the reference, whatever the exit
		// status says; keep it, or nobody could ever release it.
		tok, perr := ParseEnableToken(res.Stderr)
		if perr != nil {
			if res.ExitCode != 0 {
				return fail()
			}
			return perr
		}
		if err := b.tokens.SetPFToken(tok); err != nil {
			// Give the reference back rather than leak one pf can never
			// release (nobody would know the token).
			release := execrun.Command{Argv: []string{b.opts.Pfctl, "-X", tok}}
			if res, rerr := b.runOne(context.WithoutCancel(context.Background()), release); rerr == nil && res.ExitCode == 0 {
				return fmt.Errorf("saving the pf token (the reference was released again): %w", err)
			}
			return fmt.Errorf("saving the pf token %s failed, and releasing it failed too; run `sudo pfctl -X %s`: %w", tok, tok, err)
		}
		if res.ExitCode != 0 {
			return fail()
		}
		return nil
	case op.Kind == KindPFReference && op.Action == plan.Remove:
		// A token pf no longer knows (pfctl -d, a reboot) is as good as
		// released (reference §3.2).
		if res.ExitCode == 0 || res.ExitCode == 1 && stale(res.Stderr) {
			return b.tokens.SetPFToken("")
		}
		return fail()
	}
	if res.ExitCode != 0 {
		return fail()
	}
	return nil
}

// recordIntent saves an EnableIntent before `pfctl -E`, so that a run
// killed before it saves the token leaves what the next run needs to find
// it (heldToken). If pfctl fails or is killed, the intent stays; saving
// the token forgets it.
func (b *Backend) recordIntent(ctx context.Context) error {
	res, err := b.read(ctx, b.opts.Pfctl, "-s", "References")
	if err != nil {
		return err
	}
	refs, _, err := ParseReferences(res.Stdout, res.Stderr)
	if err != nil {
		return fmt.Errorf("reading pf references: %w", err)
	}
	in := EnableIntent{At: b.now()}
	for _, r := range refs {
		in.Before = append(in.Before, r.Token)
	}
	slices.Sort(in.Before)
	if err := b.tokens.SetEnableIntent(&in); err != nil {
		return fmt.Errorf("recording that macake is about to take a pf reference (nothing was changed): %w", err)
	}
	return nil
}

// stale reports pfctl -X's answers for a token pf no longer holds.
func stale(stderr []byte) bool {
	for _, l := range stderrLines(stderr) {
		if l == msgNotEnabled || l == msgTokenInvalid {
			return true
		}
	}
	return false
}

// SetRate is the controller's hot path: exactly one `dnctl pipe N config bw
// … queue …` for one direction of one link. The queue is sent every time,
// because a config call replaces the whole pipe configuration.
func (b *Backend) SetRate(ctx context.Context, link shape.Link, dir shape.Direction, p shape.Pipe) error {
	if !p.Shaped() {
		return fmt.Errorf("link %q: the %s is not shaped, so it has no pipe to set", link.Name, dir)
	}
	n, err := b.opts.Pipes.Pipe(link.Slot, dir)
	if err != nil {
		return fmt.Errorf("link %q: %w", link.Name, err)
	}
	cmd := PipeCommand(b.opts.Dnctl, n, p)
	res, err := b.runOne(ctx, cmd)
	if err == nil && res.ExitCode != 0 {
		err = &execrun.Error{Argv: cmd.Argv, ExitCode: res.ExitCode, Stderr: res.Stderr}
	}
	if err != nil {
		return fmt.Errorf("setting %s: %w", pipeLabel(n, link.Name, dir), err)
	}
	return nil
}

// Teardown removes everything macake owns: it plans for an empty desired
// state, executes the plan in order (anchor flushed before pipes are
// deleted, pf reference released last), stopping at the first failure, and
// forgets a held token that pf no longer knows. It is idempotent and safe
// after a crash. It returns the plan it executed.
func (b *Backend) Teardown(ctx context.Context) (plan.Plan, error) {
	// As apply does: every pipe in one dnctl (ExecuteBatch), which for
	// 200 links took 400 processes one by one (issue 27).
	p, err := backend.TeardownBatch(ctx, b)
	if err != nil {
		return p, err
	}
	if b.tokens.PFToken() != "" {
		// Plan releases a live token; one still held here is stale.
		if err := b.tokens.SetPFToken(""); err != nil {
			return p, fmt.Errorf("forgetting the stale pf token: %w", err)
		}
	}
	return p, nil
}

// read runs a read-only command; a non-zero exit is an error.
func (b *Backend) read(ctx context.Context, argv ...string) (execrun.Result, error) {
	cmd := execrun.Command{Argv: argv}
	res, err := b.runOne(ctx, cmd)
	if err != nil {
		return res, err
	}
	if res.ExitCode != 0 {
		err := &execrun.Error{Argv: argv, ExitCode: res.ExitCode, Stderr: res.Stderr}
		if unavailable(res) {
			return res, fmt.Errorf("%w: %w: %w", ErrUnavailable, backend.ErrNeedsRoot, err)
		}
		return res, err
	}
	return res, nil
}

// runOne runs one command with the per-command timeout. A program that is
// missing or not executable means pf/dummynet is unavailable.
func (b *Backend) runOne(ctx context.Context, cmd execrun.Command) (execrun.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.timeout())
	defer cancel()
	res, err := b.run.Run(ctx, cmd)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return res, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return res, err
	}
	return res, nil
}

// unavailable recognises the non-root answers: pfctl cannot open /dev/pf
// (exit 1), dnctl cannot open its raw socket (exit 69).
func unavailable(res execrun.Result) bool {
	s := string(res.Stderr)
	return res.ExitCode == 69 && strings.Contains(s, msgSocketDenied) ||
		strings.Contains(s, "/dev/pf: "+msgPermission)
}
