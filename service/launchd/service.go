// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"context"
	"fmt"

	"github.com/macake/macake/diag"
	"github.com/macake/macake/service"
)

func init() {
	service.Register("darwin", func(h service.Host) service.Manager { return Manager{Host: h} })
}

// Manager is launchd as a service.Manager: the LaunchDaemon for the
// daemon, a LaunchAgent in the user's GUI session for the agent.
type Manager struct {
	Host service.Host
}

func (m Manager) installer() *Installer {
	return &Installer{Files: m.Host.Files, Runner: m.Host.Runner, Sleep: m.Host.Sleep}
}

// Available implements service.Manager: launchd is macOS's.
func (m Manager) Available() error {
	if m.Host.GOOS != "darwin" {
		return &service.UnavailableError{Err: fmt.Errorf("launchd is macOS-only")}
	}
	return nil
}

// report starts the report of job j.
func report(j Job, dryRun bool) *service.Report {
	r := service.NewReport("launchd", j.Label, j.ServiceTarget(), j.PlistPath, dryRun)
	r.LogPath = j.LogPath
	attrs := fmt.Sprintf("%04o", j.Mode)
	if j.Owner.Name != "" {
		attrs = j.Owner.Name + " " + attrs
	}
	sudo, kind := "sudo ", "LaunchDaemon"
	if j.IsGUI() {
		sudo, kind = "", "LaunchAgent"
	}
	r.Text = service.Text{Kind: kind, FileKind: "plist", FileAttrs: attrs, Inspect: sudo + "launchctl print " + j.ServiceTarget(),
		Kept: "logs kept in " + j.LogDir, Agent: j.IsGUI()}
	return r
}

// Install implements service.Manager.
func (m Manager) Install(ctx context.Context, req service.InstallRequest, p service.Progress) (*service.Report, error) {
	var job Job
	var err error
	args := DaemonArgs(req.Program)
	if req.Agent {
		job, err = AgentJob(req.Program, req.Home, req.UID)
		args = AgentArgs(req.Program, req.Home)
	} else {
		job, err = DaemonJob(req.Program)
	}
	if err != nil {
		return nil, &service.RequestError{Err: err}
	}
	rep := report(job, req.DryRun)
	rep.ProgramArguments, rep.Warnings = args, diag.Messages(req.Warnings)
	obs, err := m.observe(ctx, job, req.DryRun, rep, Fresh(job), "that does not have the job yet", p)
	if err != nil {
		return nil, err
	}
	rep.Observed = &obs
	steps := PlanInstall(job, obs, req.Restart)
	rep.SetSteps(steps)
	if req.DryRun {
		rep.Content = string(job.Plist)
		return rep, nil
	}
	outcome, err := m.installer().Apply(ctx, job, steps, p.Done)
	rep.Notes = outcome.Notes
	for _, n := range outcome.Notes {
		p.Say(n)
	}
	if err != nil {
		rep.Error = diag.OfPtr(err)
		return rep, err
	}
	p.Finished(rep)
	return rep, nil
}

// Uninstall implements service.Manager: it boots the job out of launchd
// and removes the plist (the logs are kept).
func (m Manager) Uninstall(ctx context.Context, req service.UninstallRequest, p service.Progress) (*service.Report, error) {
	job := Daemon()
	if req.Agent {
		job = Agent(req.Home, req.UID)
	}
	rep := report(job, req.DryRun)
	installed := service.Observation{File: service.FileDifferent, Loaded: true}
	obs, err := m.observe(ctx, job, req.DryRun, rep, installed, "that has the job installed and loaded", p)
	if err != nil {
		return nil, err
	}
	rep.Observed = &obs
	steps := PlanUninstall(job, obs)
	rep.SetSteps(steps)
	if req.DryRun {
		return rep, nil
	}
	if _, err := m.installer().Apply(ctx, job, steps, p.Done); err != nil {
		rep.Error = diag.OfPtr(err)
		return rep, err
	}
	return service.FinishUninstall(rep, req, p)
}

// observe reads the machine's state for job. Off macOS there is nothing to
// ask, so a dry run shows the fallback situation (described by the phrase
// "on a Mac …"). A dry run that cannot observe (e.g. launchctl refusing a
// non-root print) falls back to it too; a real run stops.
func (m Manager) observe(ctx context.Context, job Job, dryRun bool, rep *service.Report, fallback service.Observation, situation string, p service.Progress) (service.Observation, error) {
	if err := m.Available(); err != nil {
		if !dryRun {
			return fallback, err
		}
		note := "launchd is macOS-only; this is what the command does on a Mac " + situation
		rep.Notes = append(rep.Notes, note)
		p.Say(note)
		return fallback, nil
	}
	obs, err := m.installer().Observe(ctx, job)
	if err == nil {
		return obs, nil
	}
	if dryRun {
		msg := fmt.Sprintf("cannot read the current state (%v); showing the steps on a Mac %s", err, situation)
		rep.Warnings = append(rep.Warnings, diag.Diagnostic{Message: msg})
		p.Warn(msg)
		return fallback, nil
	}
	return obs, err
}
