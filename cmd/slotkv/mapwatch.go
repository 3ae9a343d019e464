package main

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/client/node"
	"github.com/slotd/slotd/slots"
)

// directorySource keeps the slot map fresh from slotd's WatchMap stream and
// serves it to the node library. Until the first map arrives the node
// answers UNAVAILABLE rather than guess what it owns.
//
// It is the minimum a store node needs; applications use the client SDK.
type directorySource struct {
	dir slotdv1.DirectoryClient
	lg  *slog.Logger
	cur atomic.Pointer[slotmap.Map]
}

var _ node.MapSource = (*directorySource)(nil)

func newDirectorySource(conn *grpc.ClientConn, lg *slog.Logger) *directorySource {
	return &directorySource{dir: slotdv1.NewDirectoryClient(conn), lg: lg}
}

// Owner implements node.MapSource.
func (d *directorySource) Owner(s slots.Slot) (node.Owner, bool) {
	m := d.cur.Load()
	if m == nil {
		return node.Owner{}, false
	}
	r := m.RouteSlot(s)
	if !r.OK() {
		return node.Owner{}, false
	}
	return node.Owner{ID: r.Owner(), Addr: r.Addr(), Version: r.Version}, true
}

// Run watches the map until ctx is done, reconnecting with capped, jittered
// backoff while slotd is unreachable.
func (d *directorySource) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		err := d.watch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		d.lg.Warn("map watch ended; reconnecting", "err", err)
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (d *directorySource) watch(ctx context.Context) error {
	var known uint64
	if m := d.cur.Load(); m != nil {
		known = m.Version()
	}
	st, err := d.dir.WatchMap(ctx, &slotdv1.WatchMapRequest{KnownVersion: known})
	if err != nil {
		return err
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		var next *slotmap.Map
		switch u := resp.GetUpdate().(type) {
		case *slotdv1.WatchMapResponse_Full:
			next, err = slotmap.FromProto(u.Full)
		case *slotdv1.WatchMapResponse_Delta:
			cur := d.cur.Load()
			if cur == nil {
				cur = &slotmap.Map{}
			}
			next, err = cur.Apply(u.Delta)
		default:
			continue
		}
		if err != nil {
			return err // a bad update: start over with a full map
		}
		if cur := d.cur.Load(); cur != nil && next.Version() < cur.Version() {
			continue // never move the map back
		}
		d.cur.Store(next)
		d.lg.Debug("slot map updated", "version", next.Version())
	}
}
