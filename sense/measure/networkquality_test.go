// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"strings"
	"testing"
)

// networkQualityOutput is built from the fields the reference lists for
// `networkQuality -c` (macOS 12+); Apple documents no schema.
const networkQualityOutput = `{
  "base_rtt": 21.5, "dl_flows": 12, "dl_throughput": 67181720, "ul_throughput": 9876543,
  "responsiveness": 1072.4, "interface_name": "en0", "il_h2_req_resp": [20.1, 22.3],
  "other": {"l4s_enablement": "disabled"}, "test_endpoint": "x.aaplimg.com", "some_future_key": true
}`

func TestParseNetworkQuality(t *testing.T) {
	nq, err := parseNetworkQuality([]byte(networkQualityOutput))
	if err != nil {
		t.Fatal(err)
	}
	if nq.DownloadBitsPerSecond != 67181720 || nq.UploadBitsPerSecond != 9876543 || nq.BaseRTTMs != 21.5 || nq.Responsiveness != 1072.4 || nq.Interface != "en0" {
		t.Errorf("%+v", nq)
	}
	seq, err := parseNetworkQuality([]byte(`{"dl_throughput":1,"ul_throughput":2,"dl_responsiveness":800}`))
	if err != nil || seq.Responsiveness != 800 {
		t.Errorf("sequential mode: %+v %v", seq, err)
	}
	for _, bad := range []string{
		`{"dl_throughput":0,"ul_throughput":0,"error_code":-1009,"error_domain":"NSURLErrorDomain"}`,
		`{"base_rtt": 20}`,
		`not json`,
	} {
		if _, err := parseNetworkQuality([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func FuzzParseNetworkQuality(f *testing.F) {
	f.Add([]byte(networkQualityOutput))
	f.Add([]byte(`{"error_code":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseNetworkQuality(b)
	})
}

// TestNetworkQualityBesideMacake: networkQuality's line says its numbers
// in macake's words, with the grade its working round trip gives.
func TestNetworkQualityBesideMacake(t *testing.T) {
	var b strings.Builder
	nq := &NetworkQuality{DownloadBitsPerSecond: 98.2e6, UploadBitsPerSecond: 19.1e6, BaseRTTMs: 20, Responsiveness: 1000}
	nq.writeText(&b, 14)
	want := "networkQuality download 98.2 Mbit/s, upload 19.1 Mbit/s, idle 20.0ms, responsiveness 1000 RPM (good); working round trip 60.0ms, +40.0ms over idle: grade B\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}
