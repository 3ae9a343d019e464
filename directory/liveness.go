package directory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
)

// CheckLiveness runs one pass of the liveness rules and returns how many
// nodes changed state:
//   - a node not down without a live lease, whose state is older than
//     DownAfter (so a new node gets DownAfter to send its first heartbeat),
//     is marked down;
//   - a down node whose current run of heartbeats started HoldDown ago or
//     more is marked up.
//
// RunLiveness calls it periodically; tests call it directly.
func (d *Directory) CheckLiveness(ctx context.Context) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	resp, err := d.cli.Get(rctx, d.k.alivePrefix(), clientv3.WithPrefix())
	cancel()
	if err != nil {
		return 0, fromEtcd(ctx, "read liveness", err)
	}
	alive := map[string]aliveRec{}
	for _, kv := range resp.Kvs {
		var a aliveRec
		if err := json.Unmarshal(kv.Value, &a); err != nil {
			return 0, fmt.Errorf("directory: liveness of %s: %w", kv.Key, err)
		}
		alive[string(kv.Key[len(d.k.alivePrefix()):])] = a
	}
	nodes, _, err := d.Nodes(ctx)
	if err != nil {
		return 0, err
	}
	changed := 0
	for _, n := range nodes {
		now := d.cfg.Now()
		a, live := alive[n.ID]
		var want bool // the Down value the rules ask for
		var reason string
		switch {
		case !n.Down && !live && now.Sub(n.StateSince) >= d.cfg.DownAfter:
			want, reason = true, fmt.Sprintf("no heartbeat for %v", d.cfg.DownAfter)
		case n.Down && live && now.Sub(a.Since) >= d.cfg.HoldDown:
			want, reason = false, fmt.Sprintf("heartbeats for %v since %s", d.cfg.HoldDown, a.Since.Format(time.RFC3339))
		default:
			continue
		}
		kind := map[bool]string{true: ChangeNodeDown, false: ChangeNodeUp}[want]
		did := false
		v, err := d.editNode(ctx, kind, n.ID, func(_ *state, rec *nodeRec) (Change, bool, error) {
			// Re-checked on the table being written: another pass may
			// have done it already.
			did = rec.Down != want
			if !did {
				return Change{}, false, nil
			}
			rec.Down = want
			rec.StateSince = now.UTC()
			return Change{Kind: kind, Reason: reason, By: "liveness"}, true, nil
		})
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				continue // removed meanwhile
			}
			return changed, err
		}
		if !did {
			continue
		}
		changed++
		d.lg.Info("node liveness changed", "node", n.ID, "down", want, "reason", reason, "version", v)
	}
	return changed, nil
}

// NodeLiveness is what the directory knows of one node's heartbeats.
type NodeLiveness struct {
	// LastHeartbeat is when the node's lease was last renewed, to the
	// second (etcd keeps lease TTLs in whole seconds); zero when the node
	// has no live lease: it never sent a heartbeat, or missed DownAfter.
	LastHeartbeat time.Time
	// RunSince is the first heartbeat of the current unbroken run; zero
	// without a live lease.
	RunSince time.Time
	// HoldDownUntil is when a down node that is heartbeating again will be
	// marked up (RunSince + HoldDown); zero for a node that is not down or
	// not heartbeating.
	HoldDownUntil time.Time
	// OrphanBytes is the node's last report of bytes nothing explains;
	// nil without a live lease or a report.
	OrphanBytes *int64
	// LeaseGranted is when the node's live lease was granted (its last
	// registration); zero without one.
	LeaseGranted time.Time
	// LeaseExpires is when the store stops serving unless it renews
	// (LastHeartbeat + DownAfter - LeaseMargin, to the second); zero
	// without a live lease: a store without one serves nothing.
	LeaseExpires time.Time
}

// livenessReads bounds the lease lookups Liveness has in flight at once.
const livenessReads = 16

// Liveness returns the liveness of every registered node, by id: one read
// of the leases' keys, one of the nodes, and one lease lookup per live
// node (livenessReads at a time).
func (d *Directory) Liveness(ctx context.Context) (map[string]NodeLiveness, error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.alivePrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fromEtcd(ctx, "read liveness", err)
	}
	nodes, _, err := d.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]NodeLiveness, len(nodes))
	down := map[string]bool{}
	for _, n := range nodes {
		out[n.ID] = NodeLiveness{}
		down[n.ID] = n.Down
	}
	type lookup struct {
		id      string
		lease   clientv3.LeaseID
		since   time.Time
		granted time.Time
		orphan  *int64
	}
	var todo []lookup
	for _, kv := range resp.Kvs {
		id := string(kv.Key[len(d.k.alivePrefix()):])
		var a aliveRec
		if _, ok := out[id]; !ok || json.Unmarshal(kv.Value, &a) != nil {
			continue // removed meanwhile, or unreadable (CheckLiveness reports those)
		}
		todo = append(todo, lookup{id, clientv3.LeaseID(kv.Lease), a.Since, a.Granted, a.OrphanBytes})
	}
	now := d.cfg.Now()
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(rctx)
	g.SetLimit(livenessReads)
	for _, l := range todo {
		g.Go(func() error {
			ttl, err := d.cli.TimeToLive(gctx, l.lease)
			if err != nil {
				return fromEtcd(ctx, "read lease of "+l.id, err)
			}
			if ttl.TTL <= 0 {
				return nil // expired since the read
			}
			last := now.Add(-time.Duration(ttl.GrantedTTL-ttl.TTL) * time.Second).UTC().Truncate(time.Second)
			nl := NodeLiveness{
				LastHeartbeat: last,
				RunSince:      l.since,
				OrphanBytes:   l.orphan,
				LeaseGranted:  l.granted,
				LeaseExpires:  last.Add(d.cfg.DownAfter - d.cfg.LeaseMargin),
			}
			if down[l.id] {
				nl.HoldDownUntil = l.since.Add(d.cfg.HoldDown)
			}
			mu.Lock()
			out[l.id] = nl
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// RunLiveness runs CheckLiveness every LivenessInterval until ctx is done,
// then returns nil. Run it in the mover leader only (several runners are
// safe, just wasteful). Errors are logged and the loop goes on.
func (d *Directory) RunLiveness(ctx context.Context) error {
	t := time.NewTicker(d.cfg.LivenessInterval)
	defer t.Stop()
	for {
		if _, err := d.CheckLiveness(ctx); err != nil && ctx.Err() == nil {
			d.lg.Warn("liveness check failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
