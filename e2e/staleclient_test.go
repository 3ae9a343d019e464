package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotd/slotd/slotkv/kvpb"
)

// directWrite is one Put a stale client sent to a node's listen address.
type directWrite struct {
	key, value string
	call, ret  time.Time
	err        error // nil: the node acknowledged it
}

// staleClient writes to one node directly, without the SDK's routing, as an
// application holding an old map would: unique values, round-robin over its
// keys, every 10ms, recording each outcome.
type staleClient struct {
	kv   kvpb.KVClient
	keys []string
	seq  atomic.Int64

	stop context.CancelFunc
	done chan struct{}

	mu     sync.Mutex // guards writes
	writes []directWrite
}

func startStaleClient(c *cluster, addr string, keys []string) *staleClient {
	ctx, stop := context.WithCancel(context.Background())
	s := &staleClient{kv: c.kvAt(addr), keys: keys, stop: stop, done: make(chan struct{})}
	go s.run(ctx)
	c.t.Cleanup(s.Stop)
	return s
}

func (s *staleClient) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(10 * time.Millisecond) // the pace of the writes, not a wait
	defer t.Stop()
	for {
		s.Put(ctx, "stale")
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Put sends one write of a fresh value (prefix-N) to the next key and
// records it; a write the caller's ctx cancelled is not recorded.
func (s *staleClient) Put(ctx context.Context, prefix string) directWrite {
	n := s.seq.Add(1)
	w := directWrite{key: s.keys[int(n)%len(s.keys)], value: fmt.Sprintf("%s-%d", prefix, n)}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	w.call = time.Now()
	_, w.err = s.kv.Put(cctx, &kvpb.PutRequest{Key: []byte(w.key), Value: []byte(w.value)})
	w.ret = time.Now()
	if ctx.Err() != nil {
		return w
	}
	s.mu.Lock()
	s.writes = append(s.writes, w)
	s.mu.Unlock()
	return w
}

// Stop ends the background writes and waits for the last one.
func (s *staleClient) Stop() {
	s.stop()
	<-s.done
}

// Writes returns every recorded write, in the order they returned.
func (s *staleClient) Writes() []directWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.writes)
	slices.SortFunc(out, func(a, b directWrite) int { return a.ret.Compare(b.ret) })
	return out
}

// acked counts the acknowledged writes.
func (s *staleClient) acked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, w := range s.writes {
		if w.err == nil {
			n++
		}
	}
	return n
}
