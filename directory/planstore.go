package directory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// CreatePlan stores a new plan under id; it fails with ErrConflict when a
// plan with that id exists already.
func (d *Directory) CreatePlan(ctx context.Context, id string, data []byte) error {
	return d.CreatePlanRun(ctx, id, data, RunKeep)
}

// CreatePlanRun is CreatePlan that also creates the plan's run key (with
// RunStart) in the same txn: a plan stored applying.
func (d *Directory) CreatePlanRun(ctx context.Context, id string, data []byte, run Run) error {
	if err := checkID("plan id", id); err != nil {
		return fmt.Errorf("create plan: %w", err)
	}
	c, err := d.planCreation(ctx, id, data, run)
	if err != nil {
		return fmt.Errorf("create plan %s: %w", id, err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Txn(rctx).If(c.cmp).Then(c.ops...).Commit()
	c.written(err == nil && resp.Succeeded)
	if err != nil {
		return fromEtcd(ctx, "create plan "+id, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("create plan: %w: plan %s exists", ErrConflict, id)
	}
	return nil
}

// planCreation is what a transaction creating plan id does: the compare
// that no such plan exists, and the writes of the record, its run key (as
// run says) and the audit entry. written reports whether the transaction
// applied (the audit's sequence).
type planCreation struct {
	cmp     clientv3.Cmp
	ops     []clientv3.Op
	written func(applied bool)
}

// planCreation checks the record's size and prepares its creation
// (CreatePlanRun, CreatePlanMove).
func (d *Directory) planCreation(ctx context.Context, id string, data []byte, run Run) (planCreation, error) {
	if len(data) > maxPlanBytes {
		return planCreation{}, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalid, len(data), maxPlanBytes)
	}
	audit, written, err := d.auditOps(ctx, planAudit(id), AuditPlan)
	if err != nil {
		return planCreation{}, err
	}
	key := d.k.plan(id)
	return planCreation{
		cmp:     clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
		ops:     append(append(d.runOps(id, run), clientv3.OpPut(key, string(data))), audit...),
		written: written,
	}, nil
}

// UpdatePlan rewrites the plan stored under id with what edit returns for
// its current bytes, by compare-and-swap on the key's revision: it re-reads
// and calls edit again when another writer got there first (the mover
// recording progress while an operator pauses, say). An error from edit
// stops it and is returned as is. ErrNotFound when there is no such plan.
func (d *Directory) UpdatePlan(ctx context.Context, id string, edit func(old []byte) ([]byte, error)) error {
	return d.UpdatePlanRun(ctx, id, func(old []byte) ([]byte, Run, error) {
		b, err := edit(old)
		return b, RunKeep, err
	})
}

// UpdatePlanRun is UpdatePlan where edit also says what happens to the
// plan's run key, in the same txn as the new record: Apply and Resume
// start it, pause, cancel and the end of a plan stop it.
func (d *Directory) UpdatePlanRun(ctx context.Context, id string, edit func(old []byte) ([]byte, Run, error)) error {
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
		data, run, err := edit(kv.Value)
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
			Then(append(append(d.runOps(id, run), clientv3.OpPut(key, string(data))), audit...)...).Commit()
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

// PlanEvent is one write of a plan record seen by WatchPlans.
type PlanEvent struct {
	ID string
	// Record is the record as written, and its mod revision; nil when the
	// plan was deleted.
	Record *PlanRecord
	// Created says this write created the record: the plan is new, and
	// no move of it has a result yet.
	Created bool
	// Through, when non-zero, is a revision up to which the watch has
	// delivered every plan write since it began, this event included (set
	// on the last event of each etcd response).
	Through int64
	// Start marks the watch's first call, which is no write (ID is
	// empty): the watch delivers every plan write after revision Through.
	Start bool
}

// WatchPlans calls fn with every write of a plan record, until ctx is
// done; then it returns ctx.Err(). The mover's leader uses it to notice an
// operator's apply, pause or cancel without polling, and to take a plan
// created applying from the event instead of reading it back.
func (d *Directory) WatchPlans(ctx context.Context, fn func(PlanEvent)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pre := d.k.plansPrefix()
	for wr := range d.cli.Watch(wctx, pre, clientv3.WithPrefix(), clientv3.WithCreatedNotify()) {
		if err := wr.Err(); err != nil {
			return fromEtcd(ctx, "watch plans", err)
		}
		if wr.Created {
			fn(PlanEvent{Start: true, Through: wr.Header.Revision})
			continue
		}
		for i, ev := range wr.Events {
			pe := PlanEvent{ID: string(ev.Kv.Key[len(pre):])}
			if ev.Type == mvccpb.PUT {
				pe.Record = &PlanRecord{Data: ev.Kv.Value, Rev: ev.Kv.ModRevision}
				pe.Created = ev.IsCreate()
			}
			if i == len(wr.Events)-1 {
				pe.Through = wr.Header.Revision
			}
			fn(pe)
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
	keys, _, err := d.PlanKeys(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(keys))
	for _, k := range keys {
		ids = append(ids, k.ID)
	}
	slices.Sort(ids)
	return ids, nil
}

// PlanKey is a stored plan record as its key tells, without its value.
type PlanKey struct {
	ID string
	// Rev is the record's mod revision, Created the revision that created
	// it: plans created later have a higher Created.
	Rev, Created int64
}

// PlanKeys returns every stored plan record's key, oldest first (by the
// revision that created it), reading keys only; at is the revision read.
// A caller that remembers plans by revision reads only the records that
// changed.
func (d *Directory) PlanKeys(ctx context.Context) (keys []PlanKey, at int64, err error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.plansPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, 0, fromEtcd(ctx, "list plans", err)
	}
	keys = make([]PlanKey, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		keys = append(keys, PlanKey{ID: string(kv.Key[len(d.k.plansPrefix()):]), Rev: kv.ModRevision, Created: kv.CreateRevision})
	}
	return keys, resp.Header.Revision, nil
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

// DeletePlans removes the plans stored under ids, with their run keys and
// move results, up to planDeletesPerTxn of them in one etcd transaction (a retention sweep of dozens of old
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
		ops := make([]clientv3.Op, 0, 3*n)
		for _, id := range ids[:n] {
			ops = append(ops, clientv3.OpDelete(d.k.plan(id)), clientv3.OpDelete(d.k.run(id)),
				clientv3.OpDelete(d.k.resultsOf(id), clientv3.WithPrefix()))
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

// planDeletesPerTxn keeps a deletion (three operations a plan) under
// etcd's default limit of 128 operations per transaction.
const planDeletesPerTxn = 40

// A plan's run key and move results (keys.go: run/<id>, results/<id>/<i>).
// The run key says the plan may begin moves; each move's result is written
// by the transaction that ends the move, so what status, pause, cancel and
// rollback read is exactly what the table did, never a snapshot taken now
// and then.

// Move result statuses (MoveResult.Status).
const (
	ResultDone    = "done"    // committed: the target owns the slot
	ResultSkipped = "skipped" // nothing to do when its turn came (Error says why)
	ResultAborted = "aborted" // aborted for good (the plan was cancelled)
	ResultFailed  = "failed"  // aborted after a failure (Error says which)
)

// maxPlanMoves bounds a move's index in its plan (one move per slot).
const maxPlanMoves = 1 << 14

// MoveResult is the outcome of one move of a plan.
type MoveResult struct {
	Index  int    `json:"index"`
	Slot   int    `json:"slot"`
	Status string `json:"status"`
	MoveID string `json:"move_id,omitempty"`
	Error  string `json:"error,omitempty"`
	// Bytes and Keys are what the transfer applied on the target.
	Bytes int64     `json:"bytes,omitempty"`
	Keys  int64     `json:"keys,omitempty"`
	At    time.Time `json:"at"`
}

// putResult adds the result of move mv (of a plan) to m's txn.
func (d *Directory) putResult(m *mutation, mv *moveRec, r MoveResult) error {
	if mv.PlanID == "" {
		return nil
	}
	r.Index, r.Slot, r.MoveID, r.At = mv.Index, int(mv.Slot), mv.MoveID, d.cfg.Now().UTC()
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	m.extra = append(m.extra, clientv3.OpPut(d.k.result(mv.PlanID, mv.Index), string(b)))
	return nil
}

// RecordResult stores r as the result of move r.Index of plan planID, for
// outcomes no move transaction writes (a skipped move). It does not
// change the table.
func (d *Directory) RecordResult(ctx context.Context, planID string, r MoveResult) error {
	if err := checkID("plan id", planID); err != nil {
		return fmt.Errorf("record result: %w", err)
	}
	if r.Index < 0 || r.Index >= maxPlanMoves {
		return fmt.Errorf("record result: %w: move index %d out of range", ErrInvalid, r.Index)
	}
	if r.At.IsZero() {
		r.At = d.cfg.Now().UTC()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("record result: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	_, err = d.cli.Put(rctx, d.k.result(planID, r.Index), string(b))
	return fromEtcd(ctx, "record result of "+planID, err)
}

// PlanResults returns the stored results of plan id's moves by index; a
// move without one is pending (or in flight).
func (d *Directory) PlanResults(ctx context.Context, id string) (map[int]MoveResult, error) {
	if err := checkID("plan id", id); err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.resultsOf(id), clientv3.WithPrefix())
	if err != nil {
		return nil, fromEtcd(ctx, "read results of "+id, err)
	}
	out := make(map[int]MoveResult, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r MoveResult
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("directory: result %s: %w", kv.Key, err)
		}
		out[r.Index] = r
	}
	return out, nil
}

// Running reports whether plan id's run key exists.
func (d *Directory) Running(ctx context.Context, id string) (bool, error) {
	if err := checkID("plan id", id); err != nil {
		return false, fmt.Errorf("read run key: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.run(id), clientv3.WithCountOnly())
	if err != nil {
		return false, fromEtcd(ctx, "read run key of "+id, err)
	}
	return resp.Count > 0, nil
}

// Run says what a plan write does to the plan's run key.
type Run int

// Run key changes.
const (
	RunKeep  Run = iota // leave it
	RunStart            // create it: the plan may begin moves
	RunStop             // delete it: no move of the plan may begin
)

func (d *Directory) runOps(id string, r Run) []clientv3.Op {
	switch r {
	case RunStart:
		return []clientv3.Op{clientv3.OpPut(d.k.run(id), "")}
	case RunStop:
		return []clientv3.Op{clientv3.OpDelete(d.k.run(id))}
	}
	return nil
}

// AllResults returns the stored move results of every plan, by plan id and
// index, in one read.
func (d *Directory) AllResults(ctx context.Context) (map[string]map[int]MoveResult, error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	pre := d.k.resultsPrefix()
	resp, err := d.cli.Get(rctx, pre, clientv3.WithPrefix())
	if err != nil {
		return nil, fromEtcd(ctx, "read results", err)
	}
	out := map[string]map[int]MoveResult{}
	for _, kv := range resp.Kvs {
		id, _, ok := strings.Cut(string(kv.Key[len(pre):]), "/")
		if !ok {
			continue
		}
		var r MoveResult
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("directory: result %s: %w", kv.Key, err)
		}
		if out[id] == nil {
			out[id] = map[int]MoveResult{}
		}
		out[id][r.Index] = r
	}
	return out, nil
}
