package slotmap

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// watcher runs Feed.Watch in a goroutine and collects what it sends.
type watcher struct {
	cancel context.CancelFunc
	done   chan error
	got    chan *slotdv1.WatchMapResponse
}

func startWatch(f *Feed, known uint64) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{cancel: cancel, done: make(chan error, 1), got: make(chan *slotdv1.WatchMapResponse, 100)}
	go func() {
		w.done <- f.Watch(ctx, known, func(r *slotdv1.WatchMapResponse) error { w.got <- r; return nil })
	}()
	return w
}

func (w *watcher) stop(t *testing.T) {
	t.Helper()
	w.cancel()
	if err := <-w.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch returned %v, want context.Canceled", err)
	}
}

// next returns the next message as "full@V" or "delta@F->V".
func (w *watcher) next() string {
	r := <-w.got
	if f := r.GetFull(); f != nil {
		return "full@" + itoa(f.GetVersion())
	}
	d := r.GetDelta()
	return "delta@" + itoa(d.GetFromVersion()) + "->" + itoa(d.GetVersion())
}

func itoa(v uint64) string { return slots.MustNew(int(v)).String() }

func TestFeedWatch(t *testing.T) {
	nodes := testNodes(3)
	m1 := testMap(t, 1, nodes, 1)
	f := NewFeed(m1, 2)
	step := func(v uint64) *Map { return withOwners(t, m1, v, nodes, map[int]string{int(v): nodes[0].ID}) }

	fresh := startWatch(f, 0)
	if got := fresh.next(); got != "full@1" {
		t.Fatalf("first message %s, want full@1", got)
	}
	current := startWatch(f, 1)
	if got := current.next(); got != "full@1" {
		t.Fatalf("a watcher at the current version gets %s, want full@1", got)
	}
	// Each change is read before the next is published: a watcher that
	// has read delta v-1->v asks for what follows v at the latest when
	// v+2 is published, and the feed still holds both deltas after v then.
	// (Three publishes at once could outrun a watcher still at version 1
	// and give it a full map, which is right but not what this checks.)
	for v := uint64(2); v <= 4; v++ {
		if err := f.Publish(step(v)); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("delta@%d->%d", v-1, v)
		for _, w := range []*watcher{fresh, current} {
			if got := w.next(); got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		}
	}
	fresh.stop(t)
	current.stop(t)

	// Reconnecting at version 2: the feed keeps two deltas (2->3, 3->4).
	resumed := startWatch(f, 2)
	for _, want := range []string{"delta@2->3", "delta@3->4"} {
		if got := resumed.next(); got != want {
			t.Fatalf("resume from 2: got %s, want %s", got, want)
		}
	}
	resumed.stop(t)
	// Version 1 is older than the kept deltas: a full map.
	old := startWatch(f, 1)
	if got := old.next(); got != "full@4" {
		t.Fatalf("resume from 1: got %s, want full@4", got)
	}
	old.stop(t)

	if err := f.Publish(step(4)); !errors.Is(err, ErrStale) {
		t.Fatalf("Publish of the same version = %v, want ErrStale", err)
	}
	if m, pb := f.Current(); m.Version() != 4 || pb.GetVersion() != 4 {
		t.Fatalf("Current = %d, %d", m.Version(), pb.GetVersion())
	}
}

// Every watcher ends at the last published map, whatever the interleaving.
func TestFeedManyWatchers(t *testing.T) {
	nodes := testNodes(3)
	m1 := testMap(t, 1, nodes, 2)
	f := NewFeed(m1, 0)
	const watchers, versions = 20, 30
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reached := make(chan struct{}, watchers)
	for range watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var m *Map
			_ = f.Watch(ctx, 0, func(r *slotdv1.WatchMapResponse) error {
				var err error
				if full := r.GetFull(); full != nil {
					m, err = FromProto(full)
				} else {
					m, err = m.Apply(r.GetDelta())
				}
				if err != nil {
					t.Error(err)
					return err
				}
				if m.Version() == versions {
					reached <- struct{}{}
				}
				return nil
			})
		}()
	}
	cur := m1
	for v := uint64(2); v <= versions; v++ {
		cur = withOwners(t, cur, v, nodes, map[int]string{int(v): nodes[v%3].ID})
		if err := f.Publish(cur); err != nil {
			t.Fatal(err)
		}
	}
	for range watchers {
		<-reached
	}
	cancel()
	wg.Wait()
}
