// SPDX-License-Identifier: Apache-2.0

package bugreport

import (
	"strings"
	"testing"
)

func TestRedactMasksMACsAndSSIDsWhereMacakePutsThem(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"policy keys", "gateway_mac = \"74:24:9f:00:00:01\"\nssid        = \"STARLINK\"\n",
			"gateway_mac = \"[MAC-1]\"\nssid        = \"[SSID-1]\"\n"},
		{"JSON fields", `{"gateway_mac":"74:24:9F:00:00:01","ssid":"My iPhone"}`,
			`{"gateway_mac":"[MAC-1]","ssid":"[SSID-1]"}`},
		{"a log line with a network change", `level=INFO msg="link changed" event=link_change interface=en0 from=starlink to=hotspot reason="gateway 74:24:9f:00:00:01 -> none, gateway ip 192.168.1.1 -> 172.20.10.1, ssid none -> My iPhone"`,
			`level=INFO msg="link changed" event=link_change interface=en0 from=starlink to=hotspot reason="gateway [MAC-1] -> none, gateway ip 192.168.1.1 -> 172.20.10.1, ssid none -> [SSID-1]"`},
		{"logfmt values", `ssid=HOME-5G gateway_mac=a4:91:b1:00:00:02 ssid="Café Wi-Fi"`,
			`ssid=[SSID-2] gateway_mac=[MAC-1] ssid="[SSID-1]"`},
		{"prose, and inside a JSON string", `"message": "default route via en0 (gateway 192.168.1.1, 74:24:9f:00:00:01, SSID \"STARLINK\")", "x": "Wi-Fi \"Guest\""`,
			`"message": "default route via en0 (gateway 192.168.1.1, [MAC-1], SSID \"[SSID-1]\")", "x": "Wi-Fi \"[SSID-2]\""`},
		{"macOS arp drops leading zeros; one mask per address", "74:24:9f:0:0:1 and 74-24-9F-00-00-01 and 74:24:9f:00:00:01",
			"[MAC-1] and [MAC-1] and [MAC-1]"},
		{"IPv6 addresses and times are not MACs", "fd78::1:2:3:4:5:6 2001:db8:aa:bb:cc:dd:ee:ff 12:30:45 1:2:3:4:5:6:7 aa:bb:cc:dd:ee:ff:00",
			"fd78::1:2:3:4:5:6 2001:db8:aa:bb:cc:dd:ee:ff 12:30:45 1:2:3:4:5:6:7 aa:bb:cc:dd:ee:ff:00"},
		{"prose about ssids is not an ssid", "the ssid matches; ssid none; no SSID", "the ssid matches; ssid none; no SSID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewRedactor().Redact(tc.in); got != tc.want {
				t.Errorf("Redact\n  %s\n= %s\nwant\n  %s", tc.in, got, tc.want)
			}
		})
	}
}

// TestRedactKnownSSIDsEverywhere: an SSID the machine reports is masked
// wherever it appears, also before the section that names it after a
// key, and the masks agree across sections.
func TestReportRedactsAcrossSections(t *testing.T) {
	r := &Report{}
	r.Add(Section{Title: "macake links", Body: "en0 up gateway 192.168.1.1 (74:24:9f:00:00:01) ssid Home Net default"})
	r.Add(Section{Title: "/etc/macake/links.d/home.toml", Body: "[match]\ngateway_mac = \"74:24:9f:00:00:01\"\nssid = \"Home Net\"\n"})
	r.Add(Section{Title: "last log lines", Body: `level=WARN msg="drift repaired" detail="en0 gateway 74:24:9f:00:00:01 ssid=Office"` + "\nOffice again"})
	var b strings.Builder
	r.Write(&b, NewRedactor())
	out := b.String()
	for _, leak := range []string{"74:24:9f", "Home Net", "Office"} {
		if strings.Contains(out, leak) {
			t.Errorf("%q is in the redacted report:\n%s", leak, out)
		}
	}
	if strings.Count(out, "[MAC-1]") != 3 || strings.Count(out, "[SSID-1]") != 2 || strings.Count(out, "[SSID-2]") != 2 {
		t.Errorf("the masks do not agree across sections:\n%s", out)
	}
	b.Reset()
	r.Write(&b, nil)
	if !strings.Contains(b.String(), "74:24:9f:00:00:01") || !strings.Contains(b.String(), "Not redacted") {
		t.Errorf("without a redactor the report is as it is, and says so:\n%s", b.String())
	}
}

func FuzzRedact(f *testing.F) {
	f.Add(`ssid = "x" 74:24:9f:00:00:01`)
	f.Add(`SSID \"a\"`)
	f.Fuzz(func(t *testing.T, s string) {
		r := NewRedactor("STARLINK")
		out := r.Redact(s)
		// Masking is idempotent: a masked text has nothing left to mask.
		if again := r.Redact(out); again != out {
			t.Fatalf("redacting twice changes it:\n%q\n%q", out, again)
		}
	})
}
