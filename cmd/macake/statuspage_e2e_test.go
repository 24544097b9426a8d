// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/internal/headless"
)

// TestStatusPageE2E runs a real `macake watch` with status_page_listen set
// (on the emulated Mac, probing loopback reflectors) and opens its status
// page in a real headless Chromium: the page loads, shows the link with
// its live rate, follows a rate change within 2 s of the pipe changing,
// draws the charts and lists the events, pauses and resumes the link from
// its buttons, and reports no console error, uncaught exception or
// blocked load. It skips without Chromium, saying
// so (Debian: apt-get install chromium).
func TestStatusPageE2E(t *testing.T) {
	if headless.Find() == "" {
		t.Skip("skipping the status page browser test: no Chromium on PATH (Debian: apt-get install chromium chromium-driver; .ci/run installs it)")
	}
	m := newE2EMac(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	settings := fmt.Sprintf("status_page_listen = %q\n", addr)
	if err := os.WriteFile(filepath.Join(m.dir, "macake.toml"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := configtest.Policy{Interface: "en0", Download: "%s", Upload: "10mbit",
		More: "[autorate]\nreflectors = [\"127.0.0.2\", \"127.0.0.3\"]\nactive_reflectors = 2\n"}.TOML()
	m.write("home", fmt.Sprintf(policy, "50mbit"))
	m.startWatch()
	if got := m.pipes()[48002]; got != 50_000_000 {
		t.Fatalf("download pipe %d after start, want 50 Mbit/s", got)
	}

	b := headless.Start(t)
	page := b.Open("http://"+addr+"/", 1180, 900)
	rate := `document.querySelector('section.link[data-link="home"] [data-field="download-rate"]')?.textContent`
	if _, err := page.WaitFor(rate+` === "50.0 Mbit/s"`, 5*time.Second); err != nil {
		var text string
		page.Eval(`document.body.innerText`, &text)
		t.Fatalf("the page does not show the link at 50 Mbit/s: %v\npage:\n%s\nproblems: %q\nlog:\n%s", err, text, page.Problems(), m.log())
	}

	// A rate change: the edited policy restarts the controller at 35
	// Mbit/s. From the moment the pipe has it, the page must follow
	// within 2 s.
	m.write("home", fmt.Sprintf(policy, "35mbit"))
	m.eventually("the pipe at 35 Mbit/s", func() bool { return m.pipes()[48002] == 35_000_000 })
	took, err := page.WaitFor(rate+` === "35.0 Mbit/s"`, 2*time.Second)
	if err != nil {
		var shown string
		page.Eval(rate, &shown)
		t.Fatalf("the page still shows %q %v after the pipe changed: %v", shown, took, err)
	}
	t.Logf("the page showed the new rate %v after the pipe had it", took.Round(10*time.Millisecond))

	// The charts have the history, the events the edit's reconcile.
	if _, err := page.WaitFor(`document.querySelectorAll('section.link[data-link="home"] figure[data-chart="download"] path').length >= 1`, 3*time.Second); err != nil {
		t.Errorf("no line in the download chart: %v", err)
	}
	var events []string
	if err := page.Eval(`[...document.querySelectorAll('#events li')].map(e => e.textContent)`, &events); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(events, "\n"), "reconcile") {
		t.Errorf("the events do not list the reconciles: %q", events)
	}
	var live string
	page.Eval(`document.getElementById("live").textContent`, &live)
	if live != "live" {
		t.Errorf("connection badge %q", live)
	}
	// Its "Pause 15 min" button takes the link's shaping off, and the
	// page shows the pause; "Resume" puts it back.
	if err := page.Click(`section.link[data-link="home"] button[data-pause="900"]`); err != nil {
		t.Fatal(err)
	}
	m.eventually("the pipes gone after the page's pause", func() bool { return len(m.pipes()) == 0 })
	state := `document.querySelector('section.link[data-link="home"] [data-field="state"]').textContent`
	if _, err := page.WaitFor(state+`.startsWith("paused (1")`, 3*time.Second); err != nil {
		t.Errorf("the page does not show the pause: %v", err)
	}
	if st := m.status(); len(st.Pauses) != 1 || st.Pauses[0].By != "the status page" || st.Pauses[0].Link != "home" {
		t.Errorf("status after the page's pause: %+v", st.Pauses)
	}
	if err := page.Click(`section.link[data-link="home"] button[data-pause="0"]`); err != nil {
		t.Fatal(err)
	}
	m.eventually("the pipes back after the page's resume", func() bool { return len(m.pipes()) == 2 })
	if probs := page.Problems(); len(probs) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(probs, "\n"))
	}
}
