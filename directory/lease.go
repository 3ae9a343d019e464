package directory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A store's lease, and the clock rule both sides keep (docs/leases.md).
//
// slotd grants a store a lease of TTL = DownAfter when it registers; the
// store renews it with every heartbeat, naming it by its id. The store
// counts the TTL on its own monotonic clock from the moment it SENT the
// renewal that succeeded, and stops serving its slots once TTL - Margin
// has passed without another. The etcd lease behind it is granted for
// TTL + Margin (rounded up to whole seconds), and etcd counts that from
// the moment it RENEWED it, which is after the store sent the renewal; a
// new etcd leader only extends leases. So once the lease's key is gone,
// at least TTL + Margin has passed since the last renewal slotd granted,
// and a store whose clock runs at most Margin/TTL slower than etcd's has
// stopped serving at least 2 x Margin earlier. Nothing assumes the clocks
// agree on the time of day: only on the rate (etcd's and Chubby's rule).
// Only then may a node be marked down or declared failed (FailNode
// compares the key's absence in its own transaction).

// DefaultLeaseMargin is Config.LeaseMargin's default as a fraction of
// DownAfter: a tenth (1 s of the default 10 s).
const DefaultLeaseMargin = 10 // DownAfter / DefaultLeaseMargin

// ErrLeaseExpired: a renewal named a lease that is not the node's current
// one (it expired, or a newer registration replaced it). Nothing was
// renewed; the node must register again, which gives it a new lease.
var ErrLeaseExpired = errors.New("directory: lease expired")

// LeaseID names one lease of one node (the etcd lease behind it).
type LeaseID int64

// Lease is a lease as granted or renewed.
type Lease struct {
	ID LeaseID
	// TTL is how long the store may serve after sending the renewal that
	// granted this (DownAfter); it stops at TTL - Margin.
	TTL    time.Duration
	Margin time.Duration
	// Granted is when this lease was first granted (its registration).
	Granted time.Time
}

// aliveRec is the value of alive/<id>: the key exists while the node's
// lease does. Since is the first grant of the current unbroken run (what
// the hold-down counts from): a registration while a lease is live
// replaces the lease and keeps the run.
type aliveRec struct {
	Since time.Time `json:"since"`
	// Granted is when the lease attached to the key was granted.
	Granted time.Time `json:"granted,omitzero"`
	// OrphanBytes is what the node last reported of data nothing explains
	// (SetOrphanBytes); it lives and dies with the lease.
	OrphanBytes *int64 `json:"orphan_bytes,omitempty"`
	// Incarnation and Attempt name the registration that holds the lease
	// (Registrant); empty for a lease granted without one.
	Incarnation string `json:"incarnation,omitempty"`
	Attempt     uint64 `json:"attempt,omitempty"`
}

// Registrant names a store's registration: its process (Incarnation,
// random at the process's start) and the attempt's number, rising within
// the incarnation. The zero value names none.
type Registrant struct {
	Incarnation string
	Attempt     uint64
}

// etcdTTL is the TTL of the etcd lease behind a store's lease, in whole
// seconds: at least DownAfter + LeaseMargin.
func (d *Directory) etcdTTL() int64 {
	return max(int64(math.Ceil((d.cfg.DownAfter + d.cfg.LeaseMargin).Seconds())), 1)
}

func (d *Directory) lease(id clientv3.LeaseID, granted time.Time) Lease {
	return Lease{ID: LeaseID(id), TTL: d.cfg.DownAfter, Margin: d.cfg.LeaseMargin, Granted: granted}
}

// GrantLease gives node id a new lease: what a store's registration gets.
// A live lease of the node is replaced and revoked (its holder can renew
// it no more; the new lease outlives anything it was promised), and the
// run of heartbeats the hold-down counts goes on. It does not change the
// version. ErrNotFound for an unknown node; ErrConflict, granting nothing,
// for a registration by that came late: the lease is held by a later
// attempt of the same incarnation (a store whose attempt timed out on its
// side tried again, and the first reached slotd last).
func (d *Directory) GrantLease(ctx context.Context, id string, by Registrant) (Lease, error) {
	if err := checkID("node id", id); err != nil {
		return Lease{}, fmt.Errorf("grant lease: %w", err)
	}
	op := "grant lease of " + id
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	node, old, err := d.aliveOf(rctx, id)
	if err != nil {
		return Lease{}, fromEtcd(ctx, op, err)
	}
	if node == 0 {
		return Lease{}, fmt.Errorf("%s: %w: node %q is not registered", op, ErrNotFound, id)
	}
	if by.Incarnation != "" && old.rev != 0 && old.rec.Incarnation == by.Incarnation && old.rec.Attempt > by.Attempt {
		return Lease{}, fmt.Errorf("%s: %w: registration attempt %d came after attempt %d of the same process, which holds the lease; the lease stands",
			op, ErrConflict, by.Attempt, old.rec.Attempt)
	}
	lease, err := d.cli.Grant(rctx, d.etcdTTL())
	if err != nil {
		return Lease{}, fromEtcd(ctx, op, err)
	}
	now := d.cfg.Now().UTC()
	rec := aliveRec{Since: now, Granted: now, Incarnation: by.Incarnation, Attempt: by.Attempt}
	if old.rev != 0 {
		rec.Since, rec.OrphanBytes = old.rec.Since, old.rec.OrphanBytes
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return Lease{}, fmt.Errorf("directory: %s: %w", op, err)
	}
	// Only over the key as read: a registration through another slotd
	// replica meanwhile wins, and ours is given back.
	tr, err := d.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.ModRevision(d.k.node(id)), "=", node),
			clientv3.Compare(clientv3.ModRevision(d.k.alive(id)), "=", old.rev)).
		Then(clientv3.OpPut(d.k.alive(id), string(b), clientv3.WithLease(lease.ID))).
		Commit()
	if err != nil || !tr.Succeeded {
		_, _ = d.cli.Revoke(rctx, lease.ID)
	}
	if err != nil {
		return Lease{}, fromEtcd(ctx, op, err)
	}
	if !tr.Succeeded {
		return Lease{}, fmt.Errorf("%s: %w: the node registered again or was removed meanwhile", op, ErrConflict)
	}
	if old.rev != 0 && old.lease != lease.ID {
		_, _ = d.cli.Revoke(rctx, old.lease)
	}
	return d.lease(lease.ID, now), nil
}

// RenewLease renews node id's lease named by lease: a store's heartbeat.
// ErrNotFound when the node is not registered (never, removed, or
// declared failed); ErrLeaseExpired when lease is not its current lease.
// Either way nothing is renewed.
func (d *Directory) RenewLease(ctx context.Context, id string, lease LeaseID) (Lease, error) {
	if err := checkID("node id", id); err != nil {
		return Lease{}, fmt.Errorf("renew lease: %w", err)
	}
	op := "renew lease of " + id
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	node, cur, err := d.aliveOf(rctx, id)
	if err != nil {
		return Lease{}, fromEtcd(ctx, op, err)
	}
	switch {
	case node == 0:
		return Lease{}, fmt.Errorf("%s: %w: node %q is not registered", op, ErrNotFound, id)
	case cur.rev == 0 || cur.lease != clientv3.LeaseID(lease):
		return Lease{}, fmt.Errorf("%s: %w: lease %x is not the node's current lease; register again", op, ErrLeaseExpired, int64(lease))
	}
	if _, err := d.cli.KeepAliveOnce(rctx, cur.lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return Lease{}, fmt.Errorf("%s: %w: lease %x ran out; register again", op, ErrLeaseExpired, int64(lease))
		}
		return Lease{}, fromEtcd(ctx, op, err)
	}
	return d.lease(cur.lease, cur.rec.Granted), nil
}

// Touch renews node id's current lease, whoever holds it, or grants one
// that nobody holds: AddNode's grace for a store about to start (it counts
// as alive for one TTL), and tests standing in for stores. A store's
// heartbeat is RenewLease, never Touch. ErrNotFound for an unknown node.
func (d *Directory) Touch(ctx context.Context, id string) error {
	if err := checkID("node id", id); err != nil {
		return fmt.Errorf("touch: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	node, cur, err := d.aliveOf(rctx, id)
	if err != nil {
		return fromEtcd(ctx, "touch "+id, err)
	}
	if node != 0 && cur.rev != 0 {
		// The lease just read: renewed as it is, without reading it again.
		_, err := d.cli.KeepAliveOnce(rctx, cur.lease)
		if err == nil {
			return nil
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fromEtcd(ctx, "touch "+id, err)
		}
	}
	_, err = d.GrantLease(ctx, id, Registrant{})
	return err
}

// aliveKey is alive/<id> as read: rev 0 when there is none.
type aliveKey struct {
	rev   int64
	lease clientv3.LeaseID
	rec   aliveRec
}

// aliveOf reads node id's record revision (0: not registered) and its
// alive key in one transaction.
func (d *Directory) aliveOf(ctx context.Context, id string) (int64, aliveKey, error) {
	resp, err := d.cli.Txn(ctx).Then(clientv3.OpGet(d.k.node(id)), clientv3.OpGet(d.k.alive(id))).Commit()
	if err != nil {
		return 0, aliveKey{}, err
	}
	var node int64
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		node = kvs[0].ModRevision
	}
	var a aliveKey
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		a.rev, a.lease = kvs[0].ModRevision, clientv3.LeaseID(kvs[0].Lease)
		// An unreadable record still names the lease; Since starts anew.
		_ = json.Unmarshal(kvs[0].Value, &a.rec)
	}
	return node, a, nil
}
