// SPDX-License-Identifier: Apache-2.0

package service

import (
	"fmt"
	"io"
)

// StepLine renders s for a dry run ("would write …") or after the fact
// ("wrote …"), with its reason.
func StepLine(s Step, dryRun bool) string {
	past := map[StepKind]string{StepMkdir: "created", StepWrite: "wrote", StepRemove: "removed", StepRun: "ran:"}
	future := map[StepKind]string{StepMkdir: "would create", StepWrite: "would write", StepRemove: "would remove", StepRun: "would run:"}
	verb := past[s.Kind]
	if dryRun {
		verb = future[s.Kind]
	}
	line := verb + " " + s.Object()
	if s.Reason != "" {
		line += "  # " + s.Reason
	}
	return line
}

// jobCommand is the macake command a job runs.
func (r *Report) jobCommand() string {
	if r.Text.Agent {
		return "monitor"
	}
	return "watch"
}

func (r *Report) sudo() string {
	if r.Text.Agent {
		return ""
	}
	return "sudo "
}

// WriteInstall writes what an install did or, in a dry run, would do, as
// a person reads it: the service file and the steps of a dry run (a real
// run's steps were printed as they were done, through Progress), then
// what runs now, where its log is and how to look at it. command is the
// command that was run, for the way to restart.
func (r *Report) WriteInstall(w io.Writer, command string) {
	if r.DryRun {
		fmt.Fprintf(w, "# %s (%s)\n%s\n", r.Path, r.Text.FileAttrs, r.Content)
		for _, s := range r.Steps {
			fmt.Fprintln(w, StepLine(s, true))
		}
		if !r.Changed {
			fmt.Fprintf(w, "Nothing to do: %s is installed and running with this exact %s.\n", r.Label, r.Text.FileKind)
		}
		return
	}
	switch {
	case !r.Changed:
		fmt.Fprintf(w, "%s is installed and running with this exact %s; nothing to do.\n", r.Label, r.Text.FileKind)
		fmt.Fprintf(w, "To restart it: %smacake %s --restart\n", r.sudo(), command)
	case r.Observed != nil && r.Observed.NoSession:
		fmt.Fprintf(w, "Installed %s; it starts at your next login.\n", r.Path)
	default:
		when := "at every boot"
		if r.Text.Agent {
			when = "at every login"
		}
		fmt.Fprintf(w, "Installed %s: %s runs `macake %s` now and %s.\n", r.Label, r.System, r.jobCommand(), when)
	}
	logs := r.LogPath
	if logs == "" {
		logs = r.LogCommand
	}
	fmt.Fprintf(w, "Logs:   %s\n", logs)
	if !r.Text.Agent {
		fmt.Fprintln(w, "Status: sudo macake status")
	}
	fmt.Fprintf(w, "Job:    %s\n", r.Text.Inspect)
}

// WriteUninstallPlan writes the steps an uninstall dry run would take.
func (r *Report) WriteUninstallPlan(w io.Writer) {
	for _, s := range r.Steps {
		fmt.Fprintln(w, StepLine(s, true))
	}
	if !r.Changed {
		fmt.Fprintf(w, "%s is not installed; nothing to remove.\n", r.Label)
	}
	if !r.Text.Agent {
		fmt.Fprintln(w, "would run: macake down")
	}
}

// Uninstalled says what an uninstall did, before `macake down` runs.
func (r *Report) Uninstalled() string {
	if !r.Changed {
		return fmt.Sprintf("%s is not installed; nothing to remove.", r.Label)
	}
	return fmt.Sprintf("Uninstalled %s; %s.", r.Label, r.Text.Kept)
}

// DownFailed says that the daemon is gone but its shaping may not be.
func (r *Report) DownFailed(code int) string {
	return fmt.Sprintf("the %s is removed, but `macake down` failed (exit %d), so shaping may still be in place. Run `sudo macake down` to remove it.", r.Text.Kind, code)
}
