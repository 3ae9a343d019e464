package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of the zero fields of a Backoff.
const (
	DefaultInitial = 100 * time.Millisecond
	DefaultMax     = 5 * time.Second
	DefaultFactor  = 2.0
)

// Backoff is a capped, jittered exponential backoff. Its fields are set
// before use; a zero Initial, Max or Factor takes its default, a zero Jitter
// means no jitter. Delay is safe for concurrent use (when Rand is); Next,
// Reset and Sleep keep a count of attempts and are not.
type Backoff struct {
	// Initial is the first wait, before jitter. Default 100ms.
	Initial time.Duration
	// Max caps every wait, before jitter. Default 5s.
	Max time.Duration
	// Factor multiplies the wait after each attempt. Default 2.
	Factor float64
	// Jitter is the fraction, in [0, 1], a wait may be shortened by at
	// random: a wait d becomes one in [d*(1-Jitter), d]. With 1 ("full
	// jitter") it is in (0, d].
	Jitter float64
	// Rand returns a number in [0, 1); default math/rand/v2.Float64.
	// Tests inject a fixed one.
	Rand func() float64

	attempt int // waits handed out by Next since the last Reset
}

// Delay returns the wait before retry n (from 0), jittered.
func (b *Backoff) Delay(n int) time.Duration {
	d := b.Cap(n)
	if j := min(max(b.Jitter, 0), 1); j > 0 && d > 0 {
		r := rand.Float64
		if b.Rand != nil {
			r = b.Rand
		}
		d -= time.Duration(j * r() * float64(d))
	}
	return d
}

// Cap returns the wait before retry n (from 0) without jitter: the longest
// Delay(n) returns.
func (b *Backoff) Cap(n int) time.Duration {
	initial, ceil, factor := b.Initial, b.Max, b.Factor
	if initial <= 0 {
		initial = DefaultInitial
	}
	if ceil <= 0 {
		ceil = DefaultMax
	}
	if factor <= 0 {
		factor = DefaultFactor
	}
	if initial >= ceil {
		return ceil
	}
	// In floating point, where a large n overflows to +Inf, not to a
	// negative duration.
	d := float64(initial) * math.Pow(factor, float64(max(n, 0)))
	if d >= float64(ceil) || math.IsNaN(d) {
		return ceil
	}
	return time.Duration(d)
}

// Next returns the next wait and counts the attempt.
func (b *Backoff) Next() time.Duration {
	d := b.Delay(b.attempt)
	if b.attempt < math.MaxInt32 {
		b.attempt++
	}
	return d
}

// Attempts returns how many waits Next handed out since the last Reset.
func (b *Backoff) Attempts() int { return b.attempt }

// Reset starts again from Initial, after a success.
func (b *Backoff) Reset() { b.attempt = 0 }

// Sleep waits Next() or until ctx ends; it reports whether the full wait
// passed (false: ctx ended, stop retrying).
func (b *Backoff) Sleep(ctx context.Context) bool {
	return SleepContext(ctx, b.Next())
}

// SleepContext waits d or until ctx ends; it reports whether the full wait
// passed. A d of zero or less returns at once, true unless ctx has ended.
func SleepContext(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
