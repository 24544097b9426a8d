// SPDX-License-Identifier: Apache-2.0

// Package statusread reads macake's status as `macake status` (and
// `bench --compare`, which must know whether anything shapes) shows it:
// the running watch's own answer over its socket, else the static
// picture (statusbuild.Static over session.Open: the policies, which one
// matches, the rates a start would use, the live shapers if they can be
// read), with whether watch runs told from the state lock it holds,
// since a watch that does not answer is not proof that none runs.
package statusread

import (
	"context"
	"errors"
	"fmt"

	"github.com/macake/macake/config"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/daemon/statusbuild"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/session"
	"github.com/macake/macake/state"
)

// Options are what a status is read from.
type Options struct {
	// ConfigDir holds the policy files; StateDir is the state directory
	// as watch chose it (macake.toml's state_dir applied).
	ConfigDir, StateDir string
	// NotRoot: the caller is not root (the files' ownership is not
	// checked, and reading the live state may need root).
	NotRoot bool
	// Getenv reads the environment (the backend's choice, the link facts
	// file); Runner, when not nil, runs the backend's commands (the
	// tests' emulator).
	Getenv func(string) string
	Runner execrun.Runner
	// Query is what to ask the daemon for besides the status.
	Query statusapi.Query
	// Fetch asks the daemon; nil is statusapi.FetchQuery (tests play a
	// socket this user may not open, which root never meets).
	Fetch func(ctx context.Context, socket string, q statusapi.Query) (statusapi.Status, error)
}

// Read asks the daemon, or assembles the static picture when it does not
// answer.
func Read(ctx context.Context, o Options) (statusapi.Status, error) {
	fetch := o.Fetch
	if fetch == nil {
		fetch = statusapi.FetchQuery
	}
	socket := statusapi.SocketPath(o.StateDir)
	st, err := fetch(ctx, socket, o.Query)
	if err == nil {
		return st, nil
	}
	err0 := err
	note := err.Error()
	denied := errors.Is(err, statusapi.ErrPermission)
	switch {
	case errors.Is(err, statusapi.ErrNotRunning):
		note = "nothing answers on " + socket
	case denied:
		note = fmt.Sprintf("its socket answers %s only; run with sudo for its view", statusapi.Readers(socket))
	}
	st, err = static(ctx, o, socket, note)
	if err != nil {
		return st, err
	}
	if !denied {
		// No answer is not proof that watch is not running: the state lock
		// it holds is (issue 12: a socket that could not be bound made a
		// shaping watch look stopped).
		if pid, holder, held, herr := state.Holder(o.StateDir); herr == nil && held && holder == state.HolderWatch {
			st.Daemon.Running, st.Daemon.PID = true, pid
			why := "nothing listens there"
			if !errors.Is(err0, statusapi.ErrNotRunning) {
				why = err0.Error()
			}
			st.Daemon.Note = fmt.Sprintf("watch (pid %d) holds the state lock but does not answer on %s: %s; its log says why, and it binds the socket again every %v",
				pid, socket, why, statusapi.BindRetry)
		}
		return st, nil
	}
	// The socket exists but may not be opened: whether watch runs is in
	// the state lock it holds, which anyone may probe.
	st.Daemon.PermissionDenied = true
	pid, holder, held, herr := state.Holder(o.StateDir)
	switch {
	case herr != nil:
		// The socket is there and watch removes it when it stops.
		st.Daemon.Running = true
	case held && holder == state.HolderWatch:
		st.Daemon.Running, st.Daemon.PID = true, pid
	default:
		st.Daemon.Note = "nothing holds the state lock, so " + socket + " is left over from a watch that did not stop cleanly"
	}
	return st, nil
}

// static is the picture without a daemon (statusbuild.Static), read now.
func static(ctx context.Context, o Options, socket, note string) (statusapi.Status, error) {
	in := statusbuild.StaticInput{
		Daemon:  statusapi.Daemon{Socket: socket, Note: note, ConfigDir: o.ConfigDir, StateDir: o.StateDir},
		NotRoot: o.NotRoot,
	}
	ses, _ := session.Open(ctx, session.Options{
		ConfigDir: o.ConfigDir, StateDir: o.StateDir, Policies: true, Inspect: true,
		SkipOwnershipCheck: o.NotRoot, Getenv: o.Getenv, Runner: o.Runner,
	})
	pol := ses.Policies
	in.Problems = config.Problems(ses.Problems)
	// What watch keeps in force for a broken file, it would keep at a
	// start too: the picture shows the same policies.
	in.Kept = state.KeepLastGood(&pol, in.Problems, o.StateDir, ses.LoadOptions)
	in.Policies, in.MTU = pol.Links, reconcile.PolicyMTUs(pol.Links)
	in.State, in.StateErr = ses.State.State, ses.StateErr
	in.Backend, in.BackendErr = ses.Backend, ses.BackendErr
	if ses.ChooseErr != nil {
		in.BackendErr = ses.ChooseErr
	}
	in.Facts, in.FactsErr = linkfacts.Read(ctx, o.Getenv)
	return statusbuild.Static(ctx, in), nil
}
