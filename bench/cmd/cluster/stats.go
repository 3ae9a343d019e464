package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotd/slotd/slots"
)

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func median(ds []time.Duration) time.Duration { return quantile(ds, 0.5) }

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	default:
		return fmt.Sprintf("%d µs", d.Microseconds())
	}
}

func ratio(peer, ours float64) string {
	if ours <= 0 || peer <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", peer/ours)
}

// load is an open-loop client: ops at a fixed rate on a bounded set of
// keys, half GET half SET, each op timed, phase by phase.
type load struct {
	op    func(ctx context.Context, i int, set bool) error
	rate  int
	inflt chan struct{}

	mu     sync.Mutex
	phase  string
	lat    map[string][]time.Duration
	errs   map[string]int
	first  map[string]string
	ops    atomic.Int64
	missed atomic.Int64 // ticks skipped: every slot of the in-flight bound busy
}

func newLoad(rate, maxInFlight int, op func(ctx context.Context, i int, set bool) error) *load {
	return &load{op: op, rate: rate, inflt: make(chan struct{}, maxInFlight),
		lat: map[string][]time.Duration{}, errs: map[string]int{}, first: map[string]string{}}
}

func (l *load) setPhase(p string) { l.mu.Lock(); l.phase = p; l.mu.Unlock() }

// run sends ops until ctx ends, then waits for those in flight.
func (l *load) run(ctx context.Context) {
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(l.rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		select {
		case l.inflt <- struct{}{}:
		default:
			l.missed.Add(1)
			continue
		}
		l.mu.Lock()
		ph := l.phase
		l.mu.Unlock()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-l.inflt }()
			octx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			t := time.Now()
			err := l.op(octx, i, i%2 == 1)
			d := time.Since(t)
			cancel()
			l.ops.Add(1)
			l.mu.Lock()
			l.lat[ph] = append(l.lat[ph], d)
			if err != nil {
				l.errs[ph]++
				if l.first[ph] == "" {
					l.first[ph] = err.Error()
				}
			}
			l.mu.Unlock()
		}(i)
	}
}

func slotFor(n int) slots.Slot { return slots.MustNew(n) }
