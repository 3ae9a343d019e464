package node

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Clock is the time source of a Throttle; tests inject a simulated one.
type Clock interface {
	Now() time.Time
	// After is like time.After.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Throttle limits bytes per second with a token bucket. It is safe for
// concurrent use; all exports of a node share one, so the limit is per donor.
//
// The bucket holds a fiftieth of a second of tokens (burstsPerSecond) and a
// large send waits in pieces of at most that size. A reservation already
// made keeps the rate it was made at, so a new rate takes effect within
// about 20 ms (a rate below 50 B/s can take up to a second), and the burst
// after an idle period or a stall is at most 20 ms worth of bytes: no
// 1-second window carries more than 2% above the rate (with 200 ms, a
// donor that stalled, its target slow for a moment, then sent 20% above
// it), while the gaps between one move's copy and the next (a few ms) are
// still paid back.
type Throttle struct {
	clock Clock
	mu    sync.Mutex // guards lim's limit and burst changing together
	lim   *rate.Limiter
}

// NewThrottle returns a throttle at bytesPerSec; 0 or less means unlimited.
func NewThrottle(bytesPerSec int64, clock Clock) *Throttle {
	if clock == nil {
		clock = realClock{}
	}
	t := &Throttle{clock: clock, lim: rate.NewLimiter(rate.Inf, 0)}
	t.SetRate(bytesPerSec)
	return t
}

func burstFor(bytesPerSec int64) int {
	return int(max(1, min(bytesPerSec/burstsPerSecond, math.MaxInt32)))
}

// burstsPerSecond is the bucket's size as a fraction of a second of the
// rate: 50 holds 20 ms of tokens.
const burstsPerSecond = 50

// SetRate changes the limit; 0 or less means unlimited.
func (t *Throttle) SetRate(bytesPerSec int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	if bytesPerSec <= 0 {
		t.lim.SetLimitAt(now, rate.Inf)
		return
	}
	t.lim.SetLimitAt(now, rate.Limit(bytesPerSec))
	t.lim.SetBurstAt(now, burstFor(bytesPerSec))
}

// Rate returns the current limit in bytes per second, 0 when unlimited.
func (t *Throttle) Rate() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lim.Limit() == rate.Inf {
		return 0
	}
	return int64(t.lim.Limit())
}

// Wait blocks until n bytes may be sent, or ctx is done.
func (t *Throttle) Wait(ctx context.Context, n int) error {
	for n > 0 {
		t.mu.Lock()
		if t.lim.Limit() == rate.Inf {
			t.mu.Unlock()
			return nil
		}
		chunk := min(n, t.lim.Burst())
		now := t.clock.Now()
		r := t.lim.ReserveN(now, chunk)
		t.mu.Unlock()
		if !r.OK() { // burst changed under us; take the new size next round
			continue
		}
		if d := r.DelayFrom(now); d > 0 {
			select {
			case <-t.clock.After(d):
			case <-ctx.Done():
				r.CancelAt(t.clock.Now())
				return ctx.Err()
			}
		}
		n -= chunk
	}
	return ctx.Err()
}
