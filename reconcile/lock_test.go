// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestLockExcludesAndNamesTheHolder(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	held, err := AcquireLock(ctx, dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = AcquireLock(ctx, dir, 100*time.Millisecond)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, want a LockedError", err)
	}
	if le.PID != os.Getpid() || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("the error must name the holder's pid %d: %v", os.Getpid(), err)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := AcquireLock(ctx, dir, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Release()
}

func TestLockWaitsForTheHolder(t *testing.T) {
	dir := t.TempDir()
	held, err := AcquireLock(context.Background(), dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		time.Sleep(150 * time.Millisecond)
		held.Release()
		close(released)
	}()
	l, err := AcquireLock(context.Background(), dir, 10*time.Second)
	if err != nil {
		t.Fatalf("the waiter must get the lock once it is released: %v", err)
	}
	<-released
	l.Release()
}

func TestLockHonoursContext(t *testing.T) {
	dir := t.TempDir()
	held, err := AcquireLock(context.Background(), dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := AcquireLock(ctx, dir, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

func TestLockHeldByWatchSaysTheDaemonIsRunning(t *testing.T) {
	dir := t.TempDir()
	held, err := AcquireLockAs(context.Background(), dir, time.Second, HolderWatch)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	_, err = AcquireLock(context.Background(), dir, 50*time.Millisecond)
	var le *LockedError
	if !errors.As(err, &le) || le.Holder != HolderWatch || le.PID != os.Getpid() {
		t.Fatalf("got %#v (%v), want a LockedError naming watch and pid %d", le, err, os.Getpid())
	}
	for _, want := range []string{"macake watch (pid", "is running", "launchctl bootout system/org.macake.watch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error must say %q:\n%v", want, err)
		}
	}
}
