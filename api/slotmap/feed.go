package slotmap

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/slotd/slotd/api/slotdv1"
)

// ErrStale is returned by Feed.Publish for a map that is not newer than the
// feed's current one.
var ErrStale = errors.New("slotmap: map not newer than the feed's")

// DefaultFeedDeltas is how many recent deltas a Feed keeps by default.
const DefaultFeedDeltas = 1024

// Feed is the server side of the map watch: the current map, its encoding,
// and the recent deltas, each computed once however many watchers there are
// (a delta per watcher per change is what makes propagation slow with many
// watchers). A watcher that falls further behind than the kept deltas gets a
// full map. Safe for concurrent use.
type Feed struct {
	mu      sync.Mutex // guards everything below
	cur     *Map
	full    *slotdv1.SlotMap    // cur.Proto(), built once per version
	deltas  []*slotdv1.MapDelta // consecutive: deltas[i].Version == deltas[i+1].FromVersion
	keep    int
	changed chan struct{} // closed and replaced by every Publish
}

// NewFeed starts a feed at m, keeping up to keep deltas (0 for
// DefaultFeedDeltas).
func NewFeed(m *Map, keep int) *Feed {
	if keep <= 0 {
		keep = DefaultFeedDeltas
	}
	return &Feed{cur: m, full: m.Proto(), keep: keep, changed: make(chan struct{})}
}

// Publish makes m the current map. It fails with ErrStale unless m is newer.
func (f *Feed) Publish(m *Map) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m.Version() <= f.cur.Version() {
		return fmt.Errorf("%w: have %d, got %d", ErrStale, f.cur.Version(), m.Version())
	}
	f.deltas = append(f.deltas, Diff(f.cur, m))
	if len(f.deltas) > f.keep {
		// Copy rather than reslice so the dropped deltas can be collected.
		f.deltas = append(f.deltas[:0:0], f.deltas[len(f.deltas)-f.keep:]...)
	}
	f.cur, f.full = m, m.Proto()
	close(f.changed)
	f.changed = make(chan struct{})
	return nil
}

// Current returns the current map and its wire form. Neither may be modified.
func (f *Feed) Current() (*Map, *slotdv1.SlotMap) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur, f.full
}

// since returns what a watcher at version v needs: the deltas from v to the
// current version, or (when the feed no longer has them, or v is 0 or ahead)
// the full map; and the channel closed by the next Publish.
func (f *Feed) since(v uint64) (uint64, []*slotdv1.MapDelta, *slotdv1.SlotMap, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.cur.Version()
	if v == cur {
		return cur, nil, nil, f.changed
	}
	if v != 0 && v < cur {
		for i := len(f.deltas) - 1; i >= 0; i-- {
			if f.deltas[i].GetFromVersion() == v {
				return cur, f.deltas[i:len(f.deltas):len(f.deltas)], nil, f.changed
			}
		}
	}
	return cur, nil, f.full, f.changed
}

// Watch serves one WatchMap stream until ctx ends or send fails: a full map
// first (or, when known is a version the feed still has deltas from, those
// deltas), then every change in version order. A slotd handler is just
//
//	return feed.Watch(stream.Context(), req.GetKnownVersion(), stream.Send)
func (f *Feed) Watch(ctx context.Context, known uint64, send func(*slotdv1.WatchMapResponse) error) error {
	last := known
	first := true
	for {
		cur, deltas, full, changed := f.since(last)
		if first && full == nil && deltas == nil {
			// The watcher already holds the current version. The contract
			// promises a first message, so send the (cached) full map.
			_, full = f.Current()
			cur = full.GetVersion()
		}
		first = false
		if full != nil {
			if err := send(&slotdv1.WatchMapResponse{Update: &slotdv1.WatchMapResponse_Full{Full: full}}); err != nil {
				return err
			}
		}
		for _, d := range deltas {
			if err := send(&slotdv1.WatchMapResponse{Update: &slotdv1.WatchMapResponse_Delta{Delta: d}}); err != nil {
				return err
			}
		}
		last = cur
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
