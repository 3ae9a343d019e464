// Package manualclock is a clock for tests that moves only when the test
// says: Now reads it, Advance moves it, and After never fires (the tests
// run the timed passes themselves). It has the shape of node.Clock.
//
//	c := manualclock.New(time.Unix(1000, 0))
//	n, _ := node.New(node.Config{..., Clock: c})
//	c.Advance(time.Minute)
package manualclock

import (
	"sync"
	"time"
)

// Clock is a manual clock; safe for concurrent use.
type Clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

// New returns a Clock reading now.
func New(now time.Time) *Clock { return &Clock{now: now} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After never fires.
func (c *Clock) After(time.Duration) <-chan time.Time { return nil }

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
