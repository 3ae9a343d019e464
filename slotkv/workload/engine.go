package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// The one engine under every mix of this package: n clients, each sending
// one request at a time while the shared limiter admits it and ctx lasts
// (Workload, Traffic), or a fixed set of keys split over workers (Load,
// Check).

// runClients runs n clients until ctx ends: newClient(id) sets up client
// id (its random source, its own state) and returns its step, called with
// seq 0, 1, ... each time lim admits one more request. It returns when
// every client has stopped.
func runClients(ctx context.Context, n int, lim *rate.Limiter, newClient func(id int) func(seq int)) {
	var wg sync.WaitGroup
	for id := range n {
		step := newClient(id)
		wg.Go(func() {
			for seq := 0; lim.Wait(ctx) == nil; seq++ {
				step(seq)
			}
		})
	}
	wg.Wait()
}

// newRand is a client's random source.
func newRand(seed1, seed2 uint64) *rand.Rand { return rand.New(rand.NewPCG(seed1, seed2)) }

// forEachKey runs fn for keys 0..n-1 on c workers, stopping early when ctx
// ends.
func forEachKey(ctx context.Context, n, c int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// examples keeps the first few failure messages.
type examples struct {
	mu   sync.Mutex // guards list
	list []string
}

func (e *examples) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.list) < 5 {
		e.list = append(e.list, fmt.Sprintf(format, args...))
	}
}

func (e *examples) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.list
}
