// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// formatVersion versions the JSON reports (1.1: both, grades).
const formatVersion = "1.1"

// LatencyReport is a latency in the JSON reports: microseconds, null when
// nothing answered.
type LatencyReport struct {
	P50 *int64 `json:"p50_us"`
	P90 *int64 `json:"p90_us"`
}

// PhaseReport is one direction of the load in the JSON reports.
type PhaseReport struct {
	BitsPerSecond int64 `json:"bits_per_second"`
	// Added is loaded minus idle at each percentile (median over targets).
	Added       LatencyReport `json:"added"`
	Loaded      LatencyReport `json:"loaded"`
	Targets     int           `json:"targets_compared"`
	GatewayAdd  LatencyReport `json:"gateway_added"`
	TotalBytes  int64         `json:"bytes"`
	StreamCount int           `json:"streams"`
	// ProbeLoss is the share of the targets' probes under this load that
	// got no reply.
	ProbeLoss float64 `json:"probe_loss"`
}

// TargetReport is one latency target's own numbers in a Report.
type TargetReport struct {
	Address string `json:"address"`
	// Probe is how it was probed: "icmp", "tcp" or "udp" (an auto
	// reflector's address appears once for each).
	Probe    string        `json:"probe"`
	Idle     LatencyReport `json:"idle"`
	Download LatencyReport `json:"download"`
	Upload   LatencyReport `json:"upload"`
	Both     LatencyReport `json:"both"`
}

// BothReport is the load both ways at once in the JSON reports: each
// direction's throughput while the other ran, and the latency added.
type BothReport struct {
	DownloadBitsPerSecond int64         `json:"download_bits_per_second"`
	UploadBitsPerSecond   int64         `json:"upload_bits_per_second"`
	Added                 LatencyReport `json:"added"`
	Loaded                LatencyReport `json:"loaded"`
	Targets               int           `json:"targets_compared"`
	GatewayAdd            LatencyReport `json:"gateway_added"`
	ProbeLoss             float64       `json:"probe_loss"`
}

func bothReport(res LoadResult) BothReport {
	pl := res.BothLatency
	return BothReport{
		DownloadBitsPerSecond: int64(res.BothDownload.BitsPerSecond), UploadBitsPerSecond: int64(res.BothUpload.BitsPerSecond),
		Added:      LatencyReport{jsonMicros(pl.Added.P50), jsonMicros(pl.Added.P90)},
		Loaded:     LatencyReport{jsonMicros(medianOf(pl.Targets, p50)), jsonMicros(medianOf(pl.Targets, p90))},
		Targets:    pl.Added.Targets,
		GatewayAdd: LatencyReport{jsonMicros(pl.GatewayAdded.P50), jsonMicros(pl.GatewayAdded.P90)},
		ProbeLoss:  pl.Loss(),
	}
}

// Report is macake measure's result, as JSON and as text.
type Report struct {
	FormatVersion     string         `json:"format_version"`
	Link              string         `json:"link,omitempty"`
	Interface         string         `json:"interface"`
	GatewayIP         string         `json:"gateway_ip,omitempty"`
	GatewayMAC        string         `json:"gateway_mac,omitempty"`
	Server            string         `json:"server"`
	CongestionControl string         `json:"congestion_control,omitempty"`
	Idle              LatencyReport  `json:"idle"`
	GatewayIdle       LatencyReport  `json:"gateway_idle"`
	Download          PhaseReport    `json:"download"`
	Upload            PhaseReport    `json:"upload"`
	Both              BothReport     `json:"both"`
	Grades            Grades         `json:"grades"`
	Targets           []TargetReport `json:"targets"`
	// ProbeKinds is what each probe kind saw the load add, over the
	// targets probed that way.
	ProbeKinds []KindReport `json:"probe_kinds"`
	// ProbeKind is the kind measure chose for the link's auto
	// reflectors ("icmp" or "tcp"); empty when there were none.
	ProbeKind      string          `json:"probe_kind,omitempty"`
	Verdict        string          `json:"verdict"`
	NetworkQuality *NetworkQuality `json:"network_quality,omitempty"`
	ProfileKey     string          `json:"profile_key"`
	Saved          bool            `json:"saved"`
	// SavedByWatch: macake watch held the state lock, so measure handed
	// the profile to it, and the daemon saved it.
	SavedByWatch bool `json:"saved_by_watch,omitempty"`

	idleP50 time.Duration
	res     LoadResult
	target  Target
}

func lat(s probe.Summary) LatencyReport { return LatencyReport{jsonMicros(s.P50), jsonMicros(s.P90)} }

// NewReport builds the report of the load test lt, run against ep on the
// target t with the result res.
func NewReport(t Target, ep speedtest.Endpoint, lt LoadTest, res LoadResult) *Report {
	r := &Report{
		FormatVersion: formatVersion, Link: t.Link, Interface: t.Interface,
		GatewayMAC: t.Facts.GatewayMAC.String(), Server: ep.Name, CongestionControl: res.Congestion,
		ProfileKey: t.ProfileKey(), res: res, target: t,
	}
	if t.Facts.GatewayIP.IsValid() {
		r.GatewayIP = t.Facts.GatewayIP.String()
		r.GatewayIdle = lat(res.GatewayIdle)
	}
	r.idleP50 = medianOf(res.Idle, p50)
	r.Idle = LatencyReport{jsonMicros(r.idleP50), jsonMicros(medianOf(res.Idle, p90))}
	r.Download = phaseReport(res.Download, res.DownLatency)
	r.Upload = phaseReport(res.Upload, res.UpLatency)
	r.Both = bothReport(res)
	for _, t := range lt.Targets {
		a := t.Addr
		r.Targets = append(r.Targets, TargetReport{Address: a.String(), Probe: t.Kind.String(), Idle: lat(res.Idle[a]), Download: lat(res.DownLatency.Targets[a]), Upload: lat(res.UpLatency.Targets[a]), Both: lat(res.BothLatency.Targets[a])})
	}
	for _, t := range lt.Compare {
		a := t.Addr
		r.Targets = append(r.Targets, TargetReport{Address: a.String(), Probe: t.Kind.String(), Idle: lat(res.Compared.Idle[a]), Download: lat(res.Compared.Download[a]), Upload: lat(res.Compared.Upload[a])})
	}
	r.ProbeKinds = []KindReport{}
	for _, k := range res.Kinds {
		r.ProbeKinds = append(r.ProbeKinds, KindReport{Kind: k.Kind.String(), Targets: k.Targets,
			Download: LatencyReport{jsonMicros(k.Download.P50), jsonMicros(k.Download.P90)},
			Upload:   LatencyReport{jsonMicros(k.Upload.P50), jsonMicros(k.Upload.P90)}})
	}
	down, up := res.DownLatency, res.UpLatency
	var note string
	if len(lt.Compare) > 0 {
		kind, icmp, tcp := chooseProbeKind(res.Kinds)
		r.ProbeKind = kind.String()
		note = probeKindNote(kind, icmp, tcp)
		if kind == shape.ProbeTCP {
			// The verdict follows the kind that sees the queue.
			down.Added, up.Added = tcp.Download, tcp.Upload
		}
	}
	r.Verdict = verdict(down, up, lt.Gateway.IsValid())
	// The grades, like the verdict, follow the kind that sees the queue.
	graded := res
	graded.DownLatency, graded.UpLatency = down, up
	r.Grades = NewGrades(graded)
	if note != "" {
		r.Verdict += " " + note
	}
	return r
}

// KindReport is one probe kind's numbers in a Report: the latency the
// load added (loaded minus idle per percentile, median over targets).
type KindReport struct {
	Kind     string        `json:"kind"`
	Targets  int           `json:"targets_compared"`
	Download LatencyReport `json:"download_added"`
	Upload   LatencyReport `json:"upload_added"`
}

// chooseProbeKind picks how a link's auto reflectors are probed: TCP when
// its handshakes saw the load add bufferbloat (bloatThreshold or more at
// the median, in either direction) and ICMP saw less than half of that,
// which is what a network that prioritises or polices ICMP looks like;
// otherwise ICMP, which costs the reflectors less and, with timestamps,
// tells the directions apart. It also returns both kinds' numbers.
func chooseProbeKind(kinds []KindLatency) (kind shape.ProbeKind, icmp, tcp KindLatency) {
	for _, k := range kinds {
		switch k.Kind {
		case shape.ProbeICMP:
			icmp = k
		case shape.ProbeTCP:
			tcp = k
		}
	}
	if tcp.Targets == 0 {
		return shape.ProbeICMP, icmp, tcp
	}
	worstTCP := max(tcp.Download.P50, tcp.Upload.P50)
	worstICMP := max(icmp.Download.P50, icmp.Upload.P50)
	if icmp.Targets == 0 || worstTCP >= bloatThreshold && worstICMP < worstTCP/2 {
		return shape.ProbeTCP, icmp, tcp
	}
	return shape.ProbeICMP, icmp, tcp
}

// probeKindNote says what the comparison of ICMP and TCP found and what
// the link's auto reflectors will use.
func probeKindNote(kind shape.ProbeKind, icmp, tcp KindLatency) string {
	worst := func(k KindLatency) string {
		if k.Targets == 0 {
			return "nothing (no answers)"
		}
		return shape.FormatLatencyChange(max(k.Download.P50, k.Upload.P50))
	}
	if kind == shape.ProbeTCP {
		return fmt.Sprintf("ICMP saw %s at the median under load, TCP handshakes %s: this network treats ICMP apart from other traffic, so the link's auto reflectors are probed with TCP.", worst(icmp), worst(tcp))
	}
	return fmt.Sprintf("ICMP saw %s at the median under load, TCP handshakes %s: the link's auto reflectors are probed with ICMP.", worst(icmp), worst(tcp))
}

func phaseReport(sp speedtest.Result, pl PhaseLatency) PhaseReport {
	return PhaseReport{
		BitsPerSecond: int64(sp.BitsPerSecond), TotalBytes: sp.Bytes, StreamCount: sp.Streams,
		Added:      LatencyReport{jsonMicros(pl.Added.P50), jsonMicros(pl.Added.P90)},
		Loaded:     LatencyReport{jsonMicros(medianOf(pl.Targets, p50)), jsonMicros(medianOf(pl.Targets, p90))},
		Targets:    pl.Added.Targets,
		GatewayAdd: LatencyReport{jsonMicros(pl.GatewayAdded.P50), jsonMicros(pl.GatewayAdded.P90)},
		ProbeLoss:  pl.Loss(),
	}
}

// bloatThreshold: added latency below this at the median is not worth
// shaping for.
const bloatThreshold = 5 * time.Millisecond

// verdict says in one sentence whether the link is bloated and where the
// queue builds: if the gateway's latency rises about as much as the
// reflectors', the queue is at or before the gateway (this machine, Wi-Fi,
// the LAN); if not, it is beyond it (the ISP's link).
func verdict(down, up PhaseLatency, haveGateway bool) string {
	worst, dir := down, "download"
	if up.Added.P50 > down.Added.P50 {
		worst, dir = up, "upload"
	}
	if worst.Added.Targets == 0 {
		return "No latency target answered under load: the latency added by the load is unknown."
	}
	if worst.Added.P50 < bloatThreshold {
		// Loaded below idle is noise (probe resolution, a quieter
		// moment), not latency the load removed.
		return fmt.Sprintf("No significant bufferbloat: load adds at most %s at the median.", shape.FormatLatencyChange(max(worst.Added.P50, 0)))
	}
	where := "the gateway's latency was not measured, so where the queue builds is unknown"
	if haveGateway && worst.GatewayAdded.Targets > 0 {
		if worst.GatewayAdded.P50 >= worst.Added.P50/2 {
			where = fmt.Sprintf("the gateway's latency rose too (%s), so the queue builds at or before the gateway: this machine, Wi-Fi or the LAN", shape.FormatLatencyChange(worst.GatewayAdded.P50))
		} else {
			where = fmt.Sprintf("the gateway stayed at %s, so the queue builds beyond the gateway, on the ISP's link: shaping on this machine will help", shape.FormatLatencyChange(worst.GatewayAdded.P50))
		}
	}
	article := "a"
	if dir == "upload" {
		article = "an"
	}
	return fmt.Sprintf("Bufferbloat: %s %s adds %s at the median and %s at p90; %s.", article, dir, shape.FormatLatencyChange(worst.Added.P50), shape.FormatLatencyChange(worst.Added.P90), where)
}

// WriteText writes the report for people; stateDir names the state file
// the profile was saved to.
func (r *Report) WriteText(w io.Writer, stateDir string) {
	name := r.Interface
	if r.Link != "" {
		name = r.Link + " (" + r.Interface + ")"
	}
	fmt.Fprintf(w, "%-14s %s", "Link", name)
	if r.GatewayIP != "" {
		fmt.Fprintf(w, ", gateway %s", r.GatewayIP)
		if r.GatewayMAC != "" {
			fmt.Fprintf(w, " (%s)", r.GatewayMAC)
		}
	}
	fmt.Fprintf(w, "\n%-14s %s, %d streams", "Server", r.Server, r.Download.StreamCount)
	if r.CongestionControl != "" {
		fmt.Fprintf(w, ", %s", r.CongestionControl)
	}
	fmt.Fprintf(w, "\n%-14s download %s, upload %s; both at once %s and %s\n", "Capacity", shape.FormatApprox(float64(r.Download.BitsPerSecond)), shape.FormatApprox(float64(r.Upload.BitsPerSecond)),
		shape.FormatApprox(float64(r.Both.DownloadBitsPerSecond)), shape.FormatApprox(float64(r.Both.UploadBitsPerSecond)))
	gw := r.GatewayIP != ""
	row := func(name, a, b, c, d string) {
		fmt.Fprintf(w, "  %-12s %-10s %-10s", name, a, b)
		if gw {
			fmt.Fprintf(w, " %-12s %s", c, d)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%-14s %-10s %-10s", "Latency", "p50", "p90")
	if gw {
		fmt.Fprintf(w, " %-12s %s", "gateway p50", "gateway p90")
	}
	fmt.Fprintln(w)
	row("idle", shape.FormatLatency(r.res.idle(p50)), shape.FormatLatency(r.res.idle(p90)), shape.FormatLatency(r.res.GatewayIdle.P50), shape.FormatLatency(r.res.GatewayIdle.P90))
	for _, ph := range []struct {
		name string
		pl   PhaseLatency
	}{{"download", r.res.DownLatency}, {"upload", r.res.UpLatency}, {"both", r.res.BothLatency}} {
		row(ph.name, signedOrDash(ph.pl.Added.P50), signedOrDash(ph.pl.Added.P90), signedOrDash(ph.pl.GatewayAdded.P50), signedOrDash(ph.pl.GatewayAdded.P90))
	}
	fmt.Fprintf(w, "%-14s (under load: the latency added, loaded minus idle at the same percentile)\n", "")
	if len(r.res.Kinds) > 1 {
		fmt.Fprintf(w, "%-14s %-10s %-10s (the latency each kind of probe saw the load add, p50)\n", "Probes", "download", "upload")
		for _, k := range r.res.Kinds {
			fmt.Fprintf(w, "  %-12s %-10s %s\n", fmt.Sprintf("%s (%d)", k.Kind, k.Targets), signedOrDash(k.Download.P50), signedOrDash(k.Upload.P50))
		}
	}
	r.Grades.writeText(w, 14)
	if nq := r.NetworkQuality; nq != nil {
		nq.writeText(w, 14)
	}
	fmt.Fprintf(w, "\n%s\n", r.Verdict)
	switch {
	case r.SavedByWatch:
		fmt.Fprintf(w, "Saved profile %s to %s (through macake watch, which uses it now)\n", r.ProfileKey, state.Path(stateDir))
	case r.Saved:
		fmt.Fprintf(w, "Saved profile %s to %s\n", r.ProfileKey, state.Path(stateDir))
	}
}

func signedOrDash(d time.Duration) string {
	if d == -1 {
		return "-"
	}
	return shape.FormatLatencyChange(d)
}

// Profile is the measurement as the link's profile in the state file,
// measured at at. Only the measured fields are set: merged by
// state.State.RecordMeasurement, what the controller learned on the link
// (the known-good rates) stays. A direction that moved nothing has no
// capacity to save.
func (r *Report) Profile(at time.Time) (state.Profile, error) {
	if r.Download.BitsPerSecond <= 0 || r.Upload.BitsPerSecond <= 0 {
		return state.Profile{}, errors.New("a direction measured no throughput")
	}
	p := state.Profile{
		Link: r.target.Link, DownloadCapacity: r.Download.BitsPerSecond, UploadCapacity: r.Upload.BitsPerSecond,
		IdleRTT: max(r.idleP50, 0), MeasuredAt: at,
	}
	if p.Link == "" {
		p.Link = r.target.Interface
	}
	p.ProbeKind = r.ProbeKind
	return p, nil
}
