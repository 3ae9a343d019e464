package directory

import (
	"context"
	"fmt"
	"slices"

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
	audit, written, err := d.auditOps(ctx, planAudit(id), AuditPlan)
	if err != nil {
		return fmt.Errorf("create plan %s: %w", id, err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	key := d.k.plan(id)
	resp, err := d.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(append([]clientv3.Op{clientv3.OpPut(key, string(data))}, audit...)...).Commit()
	written(err == nil && resp.Succeeded)
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
		audit, written, err := d.auditOps(ctx, planAudit(id), AuditPlan)
		if err != nil {
			return fmt.Errorf("update plan %s: %w", id, err)
		}
		rctx, cancel = context.WithTimeout(ctx, d.cfg.RequestTimeout)
		tr, err := d.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(append([]clientv3.Op{clientv3.OpPut(key, string(data))}, audit...)...).Commit()
		cancel()
		written(err == nil && tr.Succeeded)
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
	audit, written, err := d.auditOps(ctx, planAudit(id), AuditPlan)
	if err != nil {
		return fmt.Errorf("put plan %s: %w", id, err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	_, err = d.cli.Txn(rctx).Then(append([]clientv3.Op{clientv3.OpPut(d.k.plan(id), string(data))}, audit...)...).Commit()
	written(err == nil)
	return fromEtcd(ctx, "put plan "+id, err)
}

// planAudit fills a plan audit entry's plan id from the record written.
func planAudit(id string) func(*AuditEntry) {
	return func(e *AuditEntry) {
		if e.PlanID == "" {
			e.PlanID = id
		}
	}
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
