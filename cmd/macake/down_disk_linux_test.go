// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/state"
)

// TestDownOnAFullOrReadOnlyStateDisk: the emergency off switch works when
// the state directory's disk is full, and when it is read-only: down
// removes everything macake owns and says what it could not record,
// instead of stopping at its lock file with the shaping still in place
// (issue 27). Needs root to mount a small tmpfs over the state directory.
func TestDownOnAFullOrReadOnlyStateDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs for the state directory")
	}
	for _, disk := range []string{"full", "read-only"} {
		t.Run(disk, func(t *testing.T) {
			r := newRig(t, map[string]string{"starlink": starlinkPolicy, "lte": ltePolicy}, starlinkFacts)
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", r.stateDir).CombinedOutput(); err != nil {
				t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
			}
			t.Cleanup(func() { exec.Command("umount", "-l", r.stateDir).Run() })
			pristine := r.emu.Snapshot().String()
			r.mustRun(exitcode.OK, "apply")
			switch disk {
			case "full":
				f, err := os.Create(filepath.Join(r.stateDir, "filler"))
				if err != nil {
					t.Fatal(err)
				}
				for err == nil {
					_, err = f.Write(make([]byte, 4096))
				}
				f.Close()
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling the disk: %v", err)
				}
				// The lock file, too, has to grow to take a pid.
				os.Truncate(filepath.Join(r.stateDir, state.LockFileName), 0)
			case "read-only":
				if out, err := exec.Command("mount", "-o", "remount,ro", r.stateDir).CombinedOutput(); err != nil {
					t.Fatalf("remounting read-only: %v: %s", err, out)
				}
			}
			code, stdout, stderr := r.run("down")
			if code != exitcode.OK {
				t.Errorf("down on a %s disk: exit %d\nstdout:\n%s\nstderr:\n%s", disk, code, stdout, stderr)
			}
			if after := r.emu.Snapshot().String(); after != pristine {
				t.Errorf("down on a %s disk left:\n%s\nwant\n%s", disk, after, pristine)
			}
			if !strings.Contains(stderr, "could not record") {
				t.Errorf("down on a %s disk does not say what it could not record:\n%s", disk, stderr)
			}
			// With the disk writable again, the stale state file (slots,
			// a released pf token) does not get in the way.
			switch disk {
			case "full":
				os.Remove(filepath.Join(r.stateDir, "filler"))
			case "read-only":
				if out, err := exec.Command("mount", "-o", "remount,rw", r.stateDir).CombinedOutput(); err != nil {
					t.Fatalf("remounting read-write: %v: %s", err, out)
				}
			}
			r.mustRun(exitcode.OK, "apply")
			r.mustRun(exitcode.OK, "down")
			if after := r.emu.Snapshot().String(); after != pristine {
				t.Errorf("apply and down after the disk was writable again left:\n%s\nwant\n%s", after, pristine)
			}
		})
	}
}
