// SPDX-License-Identifier: Apache-2.0

package measurerecord

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/macake/macake/daemon/operator"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/state"
)

var measured = state.Profile{Link: "home", DownloadCapacity: 95_000_000, UploadCapacity: 21_000_000, IdleRTT: 31 * time.Millisecond,
	MeasuredAt: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}

const measuredKey = "home@74:24:9f:00:00:01"

// TestRecordWaitsForTheStateLock: an apply holds the lock, has read the
// state and is about to save it with a new pf token; a measurement that
// finishes meanwhile waits for the lock and then adds its profile to what
// apply saved. Without the lock, apply would save its older copy over the
// profile.
func TestRecordWaitsForTheStateLock(t *testing.T) {
	dir := t.TempDir()
	if err := state.Save(dir, &state.State{Profiles: map[string]state.Profile{measuredKey: {Link: "home", GoodDownload: 80_000_000}}}); err != nil {
		t.Fatal(err)
	}
	apply, err := state.AcquireLock(t.Context(), dir, state.LockOptions{Wait: 0, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		viaWatch bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		v, err := Record(context.Background(), dir, measuredKey, measured, io.Discard)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("measure saved while apply held the lock: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	st.PFToken = "token-of-apply"
	if err := state.Save(dir, st); err != nil {
		t.Fatal(err)
	}
	apply.Release()
	r := <-done
	if r.err != nil || r.viaWatch {
		t.Fatalf("measure: %+v", r)
	}
	got, err := state.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := got.Profiles[measuredKey]
	if got.PFToken != "token-of-apply" || p.DownloadCapacity != measured.DownloadCapacity || p.IdleRTT != measured.IdleRTT || p.GoodDownload != 80_000_000 {
		t.Errorf("state after both: token %q, profile %+v; want apply's token, the measurement and the known-good rate", got.PFToken, p)
	}
}

// TestRecordHandsTheProfileToWatch: while watch holds the lock, measure
// does not write the state file; it hands the profile to the daemon over
// its socket. With a lock held by watch and nothing answering, it says so
// and saves nothing.
func TestRecordHandsTheProfileToWatch(t *testing.T) {
	defer func(w time.Duration) { lockWait = w }(lockWait)
	lockWait = 50 * time.Millisecond
	dir := t.TempDir()
	watch, err := state.AcquireLock(t.Context(), dir, state.LockOptions{Wait: 0, Holder: state.HolderWatch, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Release()

	_, err = Record(t.Context(), dir, measuredKey, measured, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "macake watch (pid") || !errors.Is(err, statusapi.ErrNotRunning) {
		t.Errorf("watch holds the lock but does not answer: %v", err)
	}

	ln, err := statusapi.Listen(statusapi.SocketPath(dir), operator.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []statusapi.Measurement
	go statusapi.Serve(t.Context(), ln, statusapi.Handler{
		Status: func(context.Context, statusapi.Query) statusapi.Status { return statusapi.Status{} },
		Measurement: func(_ context.Context, m statusapi.Measurement) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, m)
			return nil
		},
	}, nil)
	viaWatch, err := Record(t.Context(), dir, measuredKey, measured, io.Discard)
	if err != nil || !viaWatch {
		t.Fatalf("measure with watch answering: via watch %v, %v", viaWatch, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Key != measuredKey || got[0].Profile != measured {
		t.Errorf("watch got %+v", got)
	}
	if st, _ := state.Load(dir); len(st.Profiles) != 0 {
		t.Errorf("measure wrote the state file while watch held the lock: %+v", st.Profiles)
	}
}
