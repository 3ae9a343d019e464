package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/client/internal/watchwire"
	"github.com/slotd/slotd/internal/backoff"
)

// Subscribe returns a channel that receives the current map at once (if
// any) and then every new map. It holds at most one map: a slow reader
// skips intermediate maps and always gets the latest. The channel is closed
// by cancel or by Close.
func (c *Client) Subscribe() (maps <-chan *slotmap.Map, cancel func()) {
	ch := make(chan *slotmap.Map, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		close(ch)
		return ch, func() {}
	}
	c.subs[ch] = struct{}{}
	if m := c.current(); m != nil {
		ch <- m
	}
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.subs[ch]; ok {
			delete(c.subs, ch)
			close(ch)
		}
	}
}

// Refresh fetches the map now from the first endpoint that answers and
// applies it if it is newer.
func (c *Client) Refresh(ctx context.Context) error {
	known := uint64(0)
	if m := c.current(); m != nil {
		known = m.Version()
	}
	start := int(c.ep.Load())
	var errs []error
	for i := range c.dirs {
		ep := (start + i) % len(c.dirs)
		fctx, cancel := context.WithTimeout(ctx, c.opts.FetchTimeout)
		resp, err := c.dirs[ep].GetMap(fctx, &slotdv1.GetMapRequest{IfNewerThan: known})
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.opts.Endpoints[ep], err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if resp.GetUnchanged() {
			return nil
		}
		m, err := slotmap.FromProto(resp.GetMap())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.opts.Endpoints[ep], err))
			continue
		}
		if _, err := c.replace(m, sourceFetch); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.opts.Endpoints[ep], err))
			continue
		}
		return nil
	}
	return fmt.Errorf("client: fetch map: %w", errors.Join(errs...))
}

// requestRefresh asks the fetcher for a fresh map without waiting.
func (c *Client) requestRefresh() {
	select {
	case c.refresh <- struct{}{}:
	default: // one is pending already
	}
}

// fetchLoop serves refresh requests, at most one per MinFetchInterval.
func (c *Client) fetchLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.refresh:
		}
		if err := c.Refresh(ctx); err != nil && ctx.Err() == nil {
			c.lg.Warn("map fetch failed", "err", err)
		}
		if !backoff.SleepContext(ctx, c.opts.MinFetchInterval) {
			return
		}
	}
}

// watchLoop keeps one WatchMap stream open, moving to the next endpoint
// whenever a stream fails, with capped jittered backoff between attempts.
func (c *Client) watchLoop(ctx context.Context) {
	failures := 0
	for {
		ep := int(c.ep.Load())
		progressed, err := c.watchOnce(ctx, ep)
		if ctx.Err() != nil {
			return
		}
		c.m.reconnects.Inc()
		c.lastErr.Store(&err)
		if progressed {
			failures = 0
		} else {
			failures++
		}
		if !errors.Is(err, slotmap.ErrGap) {
			// The endpoint failed us: try the next one. A gap is the
			// stream's problem, not the endpoint's; reconnecting there
			// yields a full map.
			c.ep.Store(int32((ep + 1) % len(c.dirs)))
		}
		c.lg.Info("map watch ended", "endpoint", c.opts.Endpoints[ep], "err", err, "failures", failures)
		if failures > 0 && !backoff.SleepContext(ctx, c.reconnect.Delay(failures-1)) {
			return
		}
	}
}

// watchCodec receives the watch stream's updates as bytes.
var watchCodec = watchwire.NewCodec()

// watchOnce runs one stream until it fails. progressed reports whether it
// delivered at least one update.
func (c *Client) watchOnce(ctx context.Context, ep int) (progressed bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	known := uint64(0)
	if m := c.current(); m != nil {
		known = m.Version()
	}
	// Updates are received as bytes and decoded by a Decoder that reuses
	// its messages (watchwire): every change reaches every watcher, and
	// decoding each into new messages was a fifth of what a client
	// allocated per change.
	stream, err := c.dirs[ep].WatchMap(sctx, &slotdv1.WatchMapRequest{KnownVersion: known}, grpc.ForceCodecV2(watchCodec))
	if err != nil {
		return false, err
	}
	var frame watchwire.Frame
	var dec watchwire.Decoder
	for {
		if err := stream.RecvMsg(&frame); err != nil {
			return progressed, err
		}
		resp, err := dec.Decode(frame.B)
		if err != nil {
			return progressed, err
		}
		switch u := resp.GetUpdate().(type) {
		case *slotdv1.WatchMapResponse_Full:
			m, err := slotmap.FromProto(u.Full)
			if err != nil {
				return progressed, err
			}
			installed, err := c.replace(m, sourceWatchFull)
			if err != nil {
				return progressed, err
			}
			if !installed {
				// This endpoint is behind the map we hold; its deltas would
				// not fit. Another endpoint (or this one later) will do.
				return false, fmt.Errorf("%w: endpoint at version %d", errBehind, m.Version())
			}
		case *slotdv1.WatchMapResponse_Delta:
			if err := c.applyDelta(u.Delta); err != nil {
				return progressed, err
			}
		default:
			return progressed, fmt.Errorf("client: watch sent an empty update")
		}
		progressed = true
	}
}

// replace installs a full map unless it is older than the current one.
func (c *Client) replace(next *slotmap.Map, src source) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.current()
	if old != nil {
		if old.ClusterID() != next.ClusterID() {
			return false, fmt.Errorf("%w: have %q, got %q", ErrClusterMismatch, old.ClusterID(), next.ClusterID())
		}
		if next.Version() < old.Version() {
			return false, nil // never move back; a lagging replica will catch up
		}
		next = old.Replace(next)
	}
	c.storeLocked(next, src)
	return true, nil
}

// applyDelta applies a watch delta. A delta that is already covered is
// ignored; one that does not follow the current map is ErrGap.
func (c *Client) applyDelta(d *slotdv1.MapDelta) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.current()
	if old == nil {
		return fmt.Errorf("%w: delta before any full map", slotmap.ErrGap)
	}
	if d.GetVersion() <= old.Version() {
		return nil
	}
	next, err := old.Apply(d)
	if err != nil {
		return err
	}
	c.storeLocked(next, sourceWatchDelta)
	return nil
}

// patch applies a MOVED redirect to one slot if it is newer than what the
// map knows about the slot.
func (c *Client) patch(r movedTo) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.current()
	if old == nil {
		return false
	}
	next, ok := old.WithOwner(r.slot, r.owner, r.addr, r.version)
	if ok {
		c.storeLocked(next, sourceRedirect)
	}
	return ok
}

// storeLocked publishes m. c.mu must be held.
func (c *Client) storeLocked(m *slotmap.Map, src source) {
	c.cur.Store(m)
	c.m.refreshed[src].Inc()
	c.m.version.Set(float64(m.Version()))
	if c.lg.Enabled(context.Background(), slog.LevelDebug) {
		// Checked first: the arguments cost an allocation per update.
		c.lg.Debug("map updated", "version", m.Version(), "source", src.String())
	}
	for ch := range c.subs {
		select {
		case ch <- m:
		default:
			// Only this function sends, under c.mu: after draining the stale
			// map there is room.
			select {
			case <-ch:
			default:
			}
			ch <- m
		}
	}
	c.firstOnce.Do(func() { close(c.first) })
}
