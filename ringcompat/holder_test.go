package ringcompat

import (
	"errors"
	"strconv"
	"sync"
	"testing"
)

// TestHolder: concurrent Updates never lose a change, and readers always see
// a complete ring.
func TestHolder(t *testing.T) {
	h := NewHolder(mustNew(t, Config{VNodes: 8}))
	const writers, each = 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := "w" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				if _, err := h.Update(func(r *Ring) (*Ring, error) { return r.Add(Node{ID: id, Weight: 1}) }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // a reader racing the writers
		defer wg.Done()
		for range 200 {
			r := h.Load()
			if r.NumPoints() != 8*r.Len() {
				t.Errorf("reader saw %d points for %d nodes", r.NumPoints(), r.Len())
				return
			}
			r.LookupString("k")
		}
	}()
	wg.Wait()
	if got := h.Load().Len(); got != writers*each {
		t.Fatalf("holder has %d nodes after %d adds", got, writers*each)
	}
	// A failing change keeps the current ring.
	before := h.Load()
	if _, err := h.Update(func(r *Ring) (*Ring, error) { return r.Remove("nope") }); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("err = %v", err)
	}
	if h.Load() != before {
		t.Fatal("a failed Update replaced the ring")
	}
}
