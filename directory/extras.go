package directory

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The mover keeps a little state of its own in etcd, outside the versioned
// table (changing it moves no slot, so it bumps no version): the throttle
// and its plans. The directory stores it so that every key stays in keys.go.

// SetThrottle stores the mover's throttle in bytes per second per donor
// (0 means the mover's default).
func (d *Directory) SetThrottle(ctx context.Context, bytesPerSec int64) error {
	if bytesPerSec < 0 {
		return fmt.Errorf("set throttle: %w: %d bytes/s is negative", ErrInvalid, bytesPerSec)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	_, err := d.cli.Put(rctx, d.k.throttle(), strconv.FormatInt(bytesPerSec, 10))
	return fromEtcd(ctx, "set throttle", err)
}

// Throttle returns the stored throttle; ok is false when none was set.
func (d *Directory) Throttle(ctx context.Context) (bytesPerSec int64, ok bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.throttle())
	if err != nil {
		return 0, false, fromEtcd(ctx, "read throttle", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, false, nil
	}
	v, err := parseThrottle(resp.Kvs[0].Value)
	return v, err == nil, err
}

// WatchThrottle calls fn with the throttle each time it is set, starting
// with the current value (if any), until ctx is done; then it returns
// ctx.Err().
func (d *Directory) WatchThrottle(ctx context.Context, fn func(bytesPerSec int64)) error {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	resp, err := d.cli.Get(rctx, d.k.throttle())
	cancel()
	if err != nil {
		return fromEtcd(ctx, "read throttle", err)
	}
	if len(resp.Kvs) == 1 {
		if v, err := parseThrottle(resp.Kvs[0].Value); err == nil {
			fn(v)
		}
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	for wr := range d.cli.Watch(wctx, d.k.throttle(), clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			return fromEtcd(ctx, "watch throttle", err)
		}
		for _, ev := range wr.Events {
			if ev.Type != mvccpb.PUT {
				continue
			}
			if v, err := parseThrottle(ev.Kv.Value); err == nil {
				fn(v)
			}
		}
	}
	return ctx.Err()
}

func parseThrottle(b []byte) (int64, error) {
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("directory: throttle key holds %q, not bytes per second", b)
	}
	return v, nil
}

// maxPlanBytes bounds a stored plan (etcd's default request limit is 1.5 MiB).
const maxPlanBytes = 1 << 20

// PutPlan stores a mover plan under id; the directory does not read it.
func (d *Directory) PutPlan(ctx context.Context, id string, data []byte) error {
	if err := checkID("plan id", id); err != nil {
		return fmt.Errorf("put plan: %w", err)
	}
	if len(data) > maxPlanBytes {
		return fmt.Errorf("put plan %s: %w: %d bytes, at most %d", id, ErrInvalid, len(data), maxPlanBytes)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	_, err := d.cli.Put(rctx, d.k.plan(id), string(data))
	return fromEtcd(ctx, "put plan "+id, err)
}

// Plan returns the plan stored under id, or ErrNotFound.
func (d *Directory) Plan(ctx context.Context, id string) ([]byte, error) {
	if err := checkID("plan id", id); err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.plan(id))
	if err != nil {
		return nil, fromEtcd(ctx, "read plan "+id, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("read plan: %w: no plan %q", ErrNotFound, id)
	}
	return resp.Kvs[0].Value, nil
}

// PlanIDs returns the ids of the stored plans, sorted.
func (d *Directory) PlanIDs(ctx context.Context) ([]string, error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.plansPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fromEtcd(ctx, "list plans", err)
	}
	ids := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		ids = append(ids, string(kv.Key[len(d.k.plansPrefix()):]))
	}
	slices.Sort(ids)
	return ids, nil
}

// PlanRecord is a stored plan record and the mod revision it was read at.
type PlanRecord struct {
	Data []byte
	Rev  int64
}

// Plans returns every stored plan record by id, in one read.
func (d *Directory) Plans(ctx context.Context) (map[string]PlanRecord, error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.plansPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fromEtcd(ctx, "list plans", err)
	}
	out := make(map[string]PlanRecord, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key[len(d.k.plansPrefix()):])] = PlanRecord{Data: kv.Value, Rev: kv.ModRevision}
	}
	return out, nil
}

// PlanRevisions returns the mod revision of every stored plan record by
// id, reading keys only: a caller that caches decoded plans by revision
// fetches only the records that changed.
func (d *Directory) PlanRevisions(ctx context.Context) (map[string]int64, error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.plansPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fromEtcd(ctx, "list plans", err)
	}
	out := make(map[string]int64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key[len(d.k.plansPrefix()):])] = kv.ModRevision
	}
	return out, nil
}

// PlanAt returns the plan stored under id and the record's mod revision,
// or ErrNotFound.
func (d *Directory) PlanAt(ctx context.Context, id string) ([]byte, int64, error) {
	if err := checkID("plan id", id); err != nil {
		return nil, 0, fmt.Errorf("read plan: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.plan(id))
	if err != nil {
		return nil, 0, fromEtcd(ctx, "read plan "+id, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, fmt.Errorf("read plan: %w: no plan %q", ErrNotFound, id)
	}
	return resp.Kvs[0].Value, resp.Kvs[0].ModRevision, nil
}

// DeletePlans removes the plans stored under ids, up to planDeletesPerTxn
// of them in one etcd transaction (a retention sweep of dozens of old
// plans is one round trip, not dozens); deleting a missing plan is not an
// error. An invalid id deletes nothing.
func (d *Directory) DeletePlans(ctx context.Context, ids ...string) error {
	for _, id := range ids {
		if err := checkID("plan id", id); err != nil {
			return fmt.Errorf("delete plans: %w", err)
		}
	}
	for len(ids) > 0 {
		n := min(len(ids), planDeletesPerTxn)
		ops := make([]clientv3.Op, n)
		for i, id := range ids[:n] {
			ops[i] = clientv3.OpDelete(d.k.plan(id))
		}
		rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
		_, err := d.cli.Txn(rctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return fromEtcd(ctx, "delete plans", err)
		}
		ids = ids[n:]
	}
	return nil
}

// planDeletesPerTxn keeps a deletion under etcd's default limit of 128
// operations per transaction.
const planDeletesPerTxn = 100
