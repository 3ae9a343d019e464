// Package waitfor is the bounded "eventually" of the project's tests: poll
// a condition until it holds, failing the test when a generous bound passes.
// The bound only stops a hang; it asserts no timing, so a slow machine
// passes and a fast one finishes fast.
//
// Usage:
//
//	waitfor.Err(t, 20*time.Second, "the watcher", func() error { ... })
//	waitfor.True(t, 20*time.Second, "version 12", func() bool { ... })
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
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
		}
		time.Sleep(interval)
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
