// Package waitfor is the bounded "eventually" of the project's tests: poll
// a condition until it holds, failing the test when a generous bound passes.
// The bound only stops a hang; it asserts no timing, so a slow machine
// passes and a fast one finishes fast.
//
// Usage:
//
//	waitfor.Err(t, 20*time.Second, "the watcher", func() error { ... })
//	waitfor.True(t, 20*time.Second, "version 12", func() bool { ... })
//	waitfor.ErrEvery(t, time.Minute, 50*time.Millisecond, "slotctl status", func() error { ... })
package waitfor

import (
	"testing"
	"time"
)

// interval is how often a condition is polled.
const interval = 5 * time.Millisecond

// Err polls cond until it returns nil; after timeout it fails t with what
// and cond's last error.
func Err(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	ErrEvery(t, timeout, interval, what, cond)
}

// ErrEvery is Err with its own polling period instead of a few milliseconds:
// for conditions that cost a process or a round of RPCs to check.
func ErrEvery(t testing.TB, timeout, every time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
		}
		time.Sleep(every)
	}
}

// True polls cond until it returns true; after timeout it fails t.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(interval)
	}
}
