// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"cmp"
	"context"
	"fmt"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/session"
)

// checkUser says who runs doctor: as root every check can look; as anyone
// else, the checks that need root say so.
func checkUser(_ context.Context, in *Inspection) report.Result {
	if in.sys.EUID == 0 {
		return info("running as root: every check can look")
	}
	return info("running as uid %d, not root: checks that need root say so (run with sudo to check everything)", in.sys.EUID)
}

// checkOS names the operating system; macake shapes on macOS and Linux.
func checkOS(_ context.Context, in *Inspection) report.Result {
	desc := in.sys.OSVersion
	if desc == "" {
		desc = in.sys.GOOS
	}
	platform := fmt.Sprintf("%s (%s/%s)", desc, in.sys.GOOS, in.sys.GOARCH)
	switch in.sys.GOOS {
	case "darwin", "linux":
		return ok("%s", platform)
	}
	return problem("run macake on macOS (pf + dummynet) or Linux (tc)", "%s: macake cannot shape on this system", platform)
}

// checkBackend says which shaping backend this machine uses and whether it
// can be opened. Whether its tools run is the next checks' business.
func checkBackend(ctx context.Context, in *Inspection) report.Result {
	b := in.backend()
	if b.err != nil {
		return problem(fmt.Sprintf("unset %s, or set it to pf or tc", backend.EnvBackend), "%v", b.err)
	}
	settings := in.config().policies.Settings
	ses, _ := session.Open(ctx, session.Options{
		Settings: &settings, NoState: true, Inspect: true, Runner: in.sys.Runner, Getenv: in.sys.Getenv, GOOS: in.sys.GOOS,
	})
	opened, err := ses.Backend, cmp.Or(ses.ChooseErr, ses.BackendErr)
	if err != nil {
		return problem("see the checks below, or run macake on macOS", "%s backend (%s) cannot be used: %v", b.name, b.why, err)
	}
	return ok("%s, %s; it owns %s", b.name, b.why, opened.Info().Scope)
}
