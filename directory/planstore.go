package directory

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CreatePlan stores a new plan under id; it fails with ErrConflict when a
// plan with that id exists already.
func (d *Directory) CreatePlan(ctx context.Context, id string, data []byte) error {
	if err := checkID("plan id", id); err != nil {
		return fmt.Errorf("create plan: %w", err)
	}
	if len(data) > maxPlanBytes {
		return fmt.Errorf("create plan %s: %w: %d bytes, at most %d", id, ErrInvalid, len(data), maxPlanBytes)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	key := d.k.plan(id)
	resp, err := d.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data))).Commit()
	if err != nil {
		return fromEtcd(ctx, "create plan "+id, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("create plan: %w: plan %s exists", ErrConflict, id)
	}
	return nil
}

// UpdatePlan rewrites the plan stored under id with what edit returns for
// its current bytes, by compare-and-swap on the key's revision: it re-reads
// and calls edit again when another writer got there first (the mover
// recording progress while an operator pauses, say). An error from edit
// stops it and is returned as is. ErrNotFound when there is no such plan.
func (d *Directory) UpdatePlan(ctx context.Context, id string, edit func(old []byte) ([]byte, error)) error {
	if err := checkID("plan id", id); err != nil {
		return fmt.Errorf("update plan: %w", err)
	}
	key := d.k.plan(id)
	for attempt := 0; attempt < d.cfg.UpdateAttempts; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
		resp, err := d.cli.Get(rctx, key)
		cancel()
		if err != nil {
			return fromEtcd(ctx, "read plan "+id, err)
		}
		if len(resp.Kvs) == 0 {
			return fmt.Errorf("update plan: %w: no plan %q", ErrNotFound, id)
		}
		kv := resp.Kvs[0]
		data, err := edit(kv.Value)
		if err != nil {
			return err
		}
		if len(data) > maxPlanBytes {
			return fmt.Errorf("update plan %s: %w: %d bytes, at most %d", id, ErrInvalid, len(data), maxPlanBytes)
		}
		rctx, cancel = context.WithTimeout(ctx, d.cfg.RequestTimeout)
		tr, err := d.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, string(data))).Commit()
		cancel()
		if err != nil {
			return fromEtcd(ctx, "update plan "+id, err)
		}
		if tr.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("update plan %s: %w: lost %d compare-and-swap races", id, ErrConflict, d.cfg.UpdateAttempts)
}

// WatchPlans calls fn with the id of every plan that is written, until ctx
// is done; then it returns ctx.Err(). The mover's leader uses it to notice
// an operator's apply, pause or cancel without polling.
func (d *Directory) WatchPlans(ctx context.Context, fn func(id string)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pre := d.k.plansPrefix()
	for wr := range d.cli.Watch(wctx, pre, clientv3.WithPrefix()) {
		if err := wr.Err(); err != nil {
			return fromEtcd(ctx, "watch plans", err)
		}
		for _, ev := range wr.Events {
			fn(string(ev.Kv.Key[len(pre):]))
		}
	}
	return ctx.Err()
}
