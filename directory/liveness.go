package directory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
)

// aliveRec is the value of alive/<id>: the key exists while the node's
// lease does, and Since is the first heartbeat of the current unbroken run
// (what the hold-down counts from).
type aliveRec struct {
	Since time.Time `json:"since"`
	// OrphanBytes is what the node last reported of data nothing explains
	// (SetOrphanBytes); it lives and dies with the lease.
	OrphanBytes *int64 `json:"orphan_bytes,omitempty"`
}

// Heartbeat records that node id is alive. slotd calls it when the node
// pings it (nodes and clients never talk to etcd). It renews the node's
// etcd lease, whose TTL is DownAfter; once the lease expires (missed
// renewals) the next heartbeat starts a new run, and the hold-down counts
// from there. It does not change the version. ErrNotFound for an unknown
// node.
func (d *Directory) Heartbeat(ctx context.Context, id string) error {
	if err := checkID("node id", id); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	op := "heartbeat of " + id
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Txn(rctx).Then(clientv3.OpGet(d.k.node(id)), clientv3.OpGet(d.k.alive(id))).Commit()
	if err != nil {
		return fromEtcd(ctx, op, err)
	}
	if len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
		return fmt.Errorf("%s: %w: node %q is not registered", op, ErrNotFound, id)
	}
	var aliveRev int64
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		aliveRev = kvs[0].ModRevision
		_, err := d.cli.KeepAliveOnce(rctx, clientv3.LeaseID(kvs[0].Lease))
		if err == nil {
			return nil
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fromEtcd(ctx, op, err)
		}
		// The lease expired between the read and the renewal: start a new run.
	}
	ttl := int64(math.Ceil(d.cfg.DownAfter.Seconds()))
	lease, err := d.cli.Grant(rctx, max(ttl, 1))
	if err != nil {
		return fromEtcd(ctx, op, err)
	}
	b, err := json.Marshal(aliveRec{Since: d.cfg.Now().UTC()})
	if err != nil {
		return fmt.Errorf("directory: %s: %w", op, err)
	}
	// Only if nobody (another slotd replica) created the key meanwhile.
	tr, err := d.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.ModRevision(d.k.alive(id)), "=", aliveRev)).
		Then(clientv3.OpPut(d.k.alive(id), string(b), clientv3.WithLease(lease.ID))).
		Commit()
	if err != nil || !tr.Succeeded {
		// The other writer's lease stands; ours would only linger.
		_, _ = d.cli.Revoke(rctx, lease.ID)
	}
	if err != nil {
		return fromEtcd(ctx, op, err)
	}
	return nil
}

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
		id     string
		lease  clientv3.LeaseID
		since  time.Time
		orphan *int64
	}
	var todo []lookup
	for _, kv := range resp.Kvs {
		id := string(kv.Key[len(d.k.alivePrefix()):])
		var a aliveRec
		if _, ok := out[id]; !ok || json.Unmarshal(kv.Value, &a) != nil {
			continue // removed meanwhile, or unreadable (CheckLiveness reports those)
		}
		todo = append(todo, lookup{id, clientv3.LeaseID(kv.Lease), a.Since, a.OrphanBytes})
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
			nl := NodeLiveness{
				LastHeartbeat: now.Add(-time.Duration(ttl.GrantedTTL-ttl.TTL) * time.Second).UTC().Truncate(time.Second),
				RunSince:      l.since,
				OrphanBytes:   l.orphan,
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
