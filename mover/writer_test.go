package mover

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/time/rate"

	"github.com/slotd/slotd/slots"
)

// Test writers: keys in given slots, and a client writing them while
// moves run, with what it was acknowledged.

// keysInSlots returns perSlot keys for each slot of set: a hash tag that
// lands in the slot, then distinct keys carrying it.
func keysInSlots(set map[int]bool, perSlot int) [][]byte {
	tags := map[int]string{}
	for i := 0; len(tags) < len(set); i++ {
		t := fmt.Sprintf("t%d", i)
		if s := slots.ForString(t).Int(); set[s] && tags[s] == "" {
			tags[s] = t
		}
	}
	var out [][]byte
	for s := range set {
		for i := range perSlot {
			out = append(out, fmt.Appendf(nil, "{%s}:key:%d", tags[s], i))
		}
	}
	return out
}

// writer keeps writing increasing values to keys until stop, and records
// the last acknowledged value of each.
type writer struct {
	mu    sync.Mutex // guards acked
	acked map[string][]byte
	n     int
	wg    sync.WaitGroup
	stop  chan struct{}
	err   error
}

func startWriter(c *cluster, keys [][]byte) *writer { return startWriterAt(c, keys, rate.Inf) }

// startWriterAt is startWriter bounded to perSec writes a second, for long
// runs where an unbounded writer would starve the two cores it shares with
// the cluster.
func startWriterAt(c *cluster, keys [][]byte, perSec rate.Limit) *writer {
	w := &writer{acked: map[string][]byte{}, stop: make(chan struct{})}
	lim := rate.NewLimiter(perSec, 1)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for round := 0; ; round++ {
			for _, k := range keys {
				select {
				case <-w.stop:
					return
				default:
				}
				if err := lim.Wait(c.ctx); err != nil {
					w.err = err
					return
				}
				v := fmt.Appendf(nil, "v%06d-%s", round, k)
				if err := c.put(c.ctx, k, v); err != nil {
					w.err = err
					return
				}
				w.mu.Lock()
				w.acked[string(k)] = v
				w.n++
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *writer) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	w.wg.Wait()
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
}

// checkAcked asserts every acknowledged write reads back from the owner.
func checkAcked(t *testing.T, c *cluster, w *writer) {
	t.Helper()
	for k, v := range w.acked {
		got, err := c.get([]byte(k))
		if err != nil {
			t.Fatalf("get %q: %v", k, err)
		}
		if !bytes.Equal(got, v) {
			t.Fatalf("lost write: %q = %q, last acknowledged %q", k, got, v)
		}
	}
}
