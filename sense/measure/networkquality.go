// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

// NetworkQuality is the part of Apple's `networkQuality -c` JSON that
// macake compares with its own measurement.
type NetworkQuality struct {
	DownloadBitsPerSecond float64 `json:"download_bits_per_second"`
	UploadBitsPerSecond   float64 `json:"upload_bits_per_second"`
	BaseRTTMs             float64 `json:"base_rtt_ms"`
	// Responsiveness is in round trips per minute under load (RPM).
	Responsiveness float64 `json:"responsiveness_rpm"`
	Interface      string  `json:"interface,omitempty"`
}

// writeText prints networkQuality's numbers beside macake's: its
// capacity, idle round trip and responsiveness, and the grade its working
// round trip (a minute over its RPM) gives over its own idle round trip.
func (nq *NetworkQuality) writeText(w io.Writer, width int) {
	base := time.Duration(nq.BaseRTTMs * float64(time.Millisecond))
	line := fmt.Sprintf("download %s, upload %s, idle %s, responsiveness %s RPM", shape.FormatApprox(nq.DownloadBitsPerSecond),
		shape.FormatApprox(nq.UploadBitsPerSecond), shape.FormatLatency(base), FormatRPM(nq.Responsiveness))
	if c := RPMClass(nq.Responsiveness); c != "" {
		line += " (" + c + ")"
	}
	if nq.Responsiveness > 0 && base > 0 {
		working := time.Duration(float64(time.Minute) / nq.Responsiveness)
		line += fmt.Sprintf("; working round trip %s, %s over idle: grade %s", shape.FormatLatency(working), shape.FormatLatencyChange(working-base), GradeFor(working-base))
	}
	fmt.Fprintf(w, "%-*s %s\n", width, "networkQuality", line)
}

// ErrNoNetworkQuality is RunNetworkQuality's error where the tool is not
// installed (before macOS 12, and off macOS), which is not a failure of
// the cross-check.
var ErrNoNetworkQuality = errors.New("networkQuality not installed")

const networkQualityPath = "/usr/bin/networkQuality"

// RunNetworkQuality runs Apple's networkQuality over iface ("" for the
// system's choice), as a cross-check of macake's own numbers.
func RunNetworkQuality(ctx context.Context, iface string) (*NetworkQuality, error) {
	if _, err := os.Stat(networkQualityPath); err != nil {
		return nil, ErrNoNetworkQuality
	}
	argv := []string{networkQualityPath, "-c"}
	if iface != "" {
		argv = append(argv, "-I", iface)
	}
	cmd := execrun.Command{Argv: argv}
	res, err := execrun.Exec{Timeout: 90 * time.Second}.Run(ctx, cmd)
	if res, err = execrun.Check(cmd, res, err); err != nil {
		return nil, err
	}
	return parseNetworkQuality(res.Stdout)
}

// parseNetworkQuality reads `networkQuality -c` output leniently: Apple
// documents no schema and adds fields between releases, so unknown keys
// are ignored and missing ones left zero. dl_throughput and ul_throughput
// are bits/s, base_rtt is ms, responsiveness (or dl_responsiveness in
// sequential mode) is RPM. A failed run reports error_code.
func parseNetworkQuality(b []byte) (*NetworkQuality, error) {
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("reading networkQuality output: %w", err)
	}
	num := func(k string) float64 {
		if v, ok := raw[k].(float64); ok {
			return v
		}
		return 0
	}
	if code := num("error_code"); code != 0 {
		return nil, fmt.Errorf("networkQuality failed: error %v (%v)", code, raw["error_domain"])
	}
	nq := &NetworkQuality{DownloadBitsPerSecond: num("dl_throughput"), UploadBitsPerSecond: num("ul_throughput"), BaseRTTMs: num("base_rtt"), Responsiveness: num("responsiveness")}
	if nq.Responsiveness == 0 {
		nq.Responsiveness = num("dl_responsiveness")
	}
	nq.Interface, _ = raw["interface_name"].(string)
	if nq.DownloadBitsPerSecond == 0 && nq.UploadBitsPerSecond == 0 {
		return nil, errors.New("networkQuality reported no throughput")
	}
	return nq, nil
}
