package mover

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/slotd/slotd/directory"
)

// Plan storage: plan records through the directory's plan API
// (directory/planstore.go), their decoded cache, retention, and the move
// results that the directory writes in the transaction ending each move.
// A plan read here shows exactly what the table did.

// maxPlanID is the longest plan id the directory accepts.
const maxPlanID = 64

// boundID returns id when it fits in a plan id, else its first part and a
// hash of the rest: plan ids must not grow with node-id length (a move to
// a 64-character node id, a rollback of a rollback).
func boundID(id string) string {
	if len(id) <= maxPlanID {
		return id
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	sum := fmt.Sprintf("%016x", h.Sum64())
	return id[:maxPlanID-len(sum)-1] + "-" + sum
}

// moveID names move i of plan id: "<plan id>.<i>", hashed when too long.
// It is stable, so a retried BeginMove finds its own first attempt.
func moveID(planID string, i int) string {
	return boundID(fmt.Sprintf("%s.%d", planID, i))
}

// mergeResults applies the directory's move results to p's moves.
func mergeResults(p *Plan, res map[int]directory.MoveResult) {
	for i, r := range res {
		if i < 0 || i >= len(p.Moves) {
			continue
		}
		m := &p.Moves[i]
		m.Status, m.Error, m.MoveID, m.Finished = MoveStatus(r.Status), r.Error, r.MoveID, r.At
		m.Copied = r.Bytes
	}
}

// withResults reads p's move results and merges them.
func (c *Control) withResults(ctx context.Context, p *Plan) (*Plan, error) {
	if p.State == StateProposed {
		return p, nil // never applied: nothing ran
	}
	res, err := c.dir.PlanResults(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	mergeResults(p, res)
	return p, nil
}

// store creates the plan record; an identical plan proposed twice (same
// table, same moves) is the same plan.
func (c *Control) store(ctx context.Context, p *Plan) error {
	data, err := encodePlan(p)
	if err != nil {
		return err
	}
	run := directory.RunKeep
	if p.State == StateApplying {
		run = directory.RunStart
	}
	err = c.dir.CreatePlanRun(ctx, p.ID, data, run)
	if errors.Is(err, directory.ErrConflict) {
		old, gerr := c.Get(ctx, p.ID)
		if gerr == nil && old.State == StateProposed {
			return c.update(ctx, p.ID, func(q *Plan) error { *q = *p; return nil })
		}
		if gerr == nil {
			return fmt.Errorf("plan: %w: the same plan %s exists already and is %s", ErrPrecondition, p.ID, old.State)
		}
	}
	if err != nil {
		return fmt.Errorf("store plan %s: %w", p.ID, err)
	}
	c.prune(ctx)
	return nil
}

// prune deletes the oldest plans, with their run keys and results, beyond the
// newest c.keep that are not applying or paused. It reads the plan keys
// only when the records outnumber the limit by a margin, so that storing a
// plan does not read every plan each time, and then only the records whose
// state this process does not know at their revision (the leader's plan
// watch tells it of every write): a sweep decoded every record, a JSON
// decode each, and made every 21st `slotctl move` 20 ms slower at the
// default KeepPlans. A failure is logged, not returned.
func (c *Control) prune(ctx context.Context) {
	limit := c.keep + c.keep/10 + 1
	c.decodedMu.Lock()
	c.plansSeen++
	known := c.plansSeen
	c.decodedMu.Unlock()
	if known <= limit {
		return // fewer plans than allowed: no read needed
	}
	keys, err := c.planStates(ctx)
	if err != nil {
		c.lg.Warn("list plans for retention", "err", err)
		return
	}
	var ended []planKeyState // not applying or paused, oldest first
	for _, k := range keys {
		if k.known && !k.state.Active() {
			ended = append(ended, k)
		}
	}
	old := ended[:max(0, len(ended)-c.keep)]
	if len(old) == 0 {
		return
	}
	// One transaction for all of them: this runs inside the request that
	// stored a plan (slotctl move), and a sweep of 20 plans deleted one
	// record at a time added 36-40 ms to every 21st move.
	ids := make([]string, 0, len(old))
	for _, k := range old {
		ids = append(ids, k.ID)
	}
	if err := c.dir.DeletePlans(ctx, ids...); err != nil {
		c.lg.Warn("delete old plans", "plans", len(old), "err", err)
		return
	}
	c.decodedMu.Lock()
	for _, id := range ids {
		delete(c.decoded, id)
		delete(c.states, id)
	}
	c.plansSeen -= len(old)
	c.decodedMu.Unlock()
	c.lg.Info("old plans deleted", "plans", len(old), "oldest", ids[0], "newest", ids[len(ids)-1])
}

// Get returns the stored plan id with the results of its moves.
func (c *Control) Get(ctx context.Context, id string) (*Plan, error) {
	b, err := c.dir.Plan(ctx, id)
	if err != nil {
		if errors.Is(err, directory.ErrNotFound) || errors.Is(err, directory.ErrInvalid) {
			return nil, fmt.Errorf("%w: no plan %q; list plans with slotctl plans list", ErrNotFound, id)
		}
		return nil, err
	}
	p, err := c.decode(id, b)
	if err != nil {
		return nil, err
	}
	return c.withResults(ctx, p)
}

// record returns plan id's record alone, without its moves' results: what
// operators change (state, abort request), for the executor's guard.
func (c *Control) record(ctx context.Context, id string) (*Plan, error) {
	b, err := c.dir.Plan(ctx, id)
	if err != nil {
		if errors.Is(err, directory.ErrNotFound) || errors.Is(err, directory.ErrInvalid) {
			return nil, fmt.Errorf("%w: no plan %q", ErrNotFound, id)
		}
		return nil, err
	}
	return c.decode(id, b)
}

// decode returns a private copy of the plan record b of plan id, decoding
// it only when it differs from the record last decoded.
func (c *Control) decode(id string, b []byte) (*Plan, error) {
	c.decodedMu.Lock()
	d, ok := c.decoded[id]
	c.decodedMu.Unlock()
	if ok && bytes.Equal(d.raw, b) {
		return d.plan.clone(), nil
	}
	p, err := decodePlan(b)
	if err != nil {
		return nil, err
	}
	c.decodedMu.Lock()
	if c.decoded == nil || len(c.decoded) >= 64 {
		c.decoded = map[string]decodedPlan{} // plans are few; forget them all now and then
	}
	c.decoded[id] = decodedPlan{raw: b, plan: p.clone()}
	c.decodedMu.Unlock()
	return p, nil
}

// List returns every stored plan with its results, oldest first, from one
// read of the records and one of the results.
func (c *Control) List(ctx context.Context) ([]*Plan, error) {
	recs, err := c.dir.Plans(ctx)
	if err != nil {
		return nil, err
	}
	results, err := c.dir.AllResults(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Plan
	for id, rec := range recs {
		p, err := c.decode(id, rec.Data)
		if err != nil {
			c.lg.Warn("unreadable plan record", "plan", id, "err", err)
			continue
		}
		mergeResults(p, results[id])
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Plan) int { return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID)) })
	return out, nil
}

// Active returns the plan that is applying or paused, or nil. It reads
// the plan keys and only the records that changed since it last looked:
// every `slotctl move` and status asks, and up to KeepPlans plans are kept.
func (c *Control) Active(ctx context.Context) (*Plan, error) {
	keys, err := c.planStates(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Plan
	for _, k := range keys {
		if !k.known || !k.state.Active() {
			continue
		}
		p, err := c.Get(ctx, k.ID)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Plan) int { return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID)) })
	return activeOf(out), nil
}

// planKeyState is a stored plan record's key and, when known, its state.
type planKeyState struct {
	directory.PlanKey
	state PlanState
	known bool // false: the record could not be decoded
}

// planStates returns every stored plan record, oldest first, with its
// state: from c.states when it holds the record's revision, else read and
// remembered (learnStates). One read of the keys, and of the records that
// changed since this process last learned of them.
func (c *Control) planStates(ctx context.Context) ([]planKeyState, error) {
	keys, at, err := c.dir.PlanKeys(ctx)
	if err != nil {
		return nil, err
	}
	var stale []string // plans whose state is not known at their revision
	c.decodedMu.Lock()
	c.plansSeen = len(keys)
	for _, k := range keys {
		if st, ok := c.states[k.ID]; !ok || st.rev != k.Rev {
			stale = append(stale, k.ID)
		}
	}
	c.decodedMu.Unlock()
	complete, err := c.learnStates(ctx, stale)
	if err != nil {
		return nil, err
	}
	out := make([]planKeyState, len(keys))
	revs := make(map[string]int64, len(keys))
	c.decodedMu.Lock()
	defer c.decodedMu.Unlock()
	for i, k := range keys {
		st, ok := c.states[k.ID]
		out[i] = planKeyState{PlanKey: k, state: st.state, known: ok && st.rev >= k.Rev}
		revs[k.ID] = k.Rev
	}
	if complete {
		c.readAt(at, revs)
	}
	return out, nil
}

// learnStates reads and remembers the states of plans ids: one read of
// every record when there are many (the first call after a start), else
// one read each. complete is false when a record could not be decoded.
func (c *Control) learnStates(ctx context.Context, ids []string) (complete bool, err error) {
	recs := map[string]directory.PlanRecord{}
	if len(ids) > 8 {
		all, err := c.dir.Plans(ctx)
		if err != nil {
			return false, err
		}
		for _, id := range ids {
			if rec, ok := all[id]; ok {
				recs[id] = rec
			}
		}
	} else {
		for _, id := range ids {
			b, rev, err := c.dir.PlanAt(ctx, id)
			if errors.Is(err, directory.ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return false, err
			}
			recs[id] = directory.PlanRecord{Data: b, Rev: rev}
		}
	}
	complete = true
	for id, rec := range recs {
		p, err := c.decode(id, rec.Data)
		if err != nil {
			c.lg.Warn("unreadable plan record", "plan", id, "err", err)
			complete = false
			continue
		}
		c.decodedMu.Lock()
		c.setState(id, planState{rev: rec.Rev, state: p.State})
		c.decodedMu.Unlock()
	}
	return complete, nil
}

// learnRecord remembers what the leader's plan watch saw (ev): the state
// of the record it wrote, or its deletion. Active then needs no read of a
// plan this process (or another) wrote since Active last looked, and
// `slotctl move` none at all (plansIdle).
func (c *Control) learnRecord(ev directory.PlanEvent) {
	c.decodedMu.Lock()
	defer c.decodedMu.Unlock()
	k := &c.known
	switch {
	case ev.Start:
		// A new watch: what the last one delivered says nothing of the
		// writes before this one began.
		k.watchFrom, k.watchThrough = ev.Through, ev.Through
		return
	case ev.Record == nil:
		delete(c.states, ev.ID)
	default:
		c.decodedMu.Unlock()
		p, err := c.decode(ev.ID, ev.Record.Data)
		c.decodedMu.Lock()
		if err != nil {
			k.readRev = 0 // Active reads it and says why
			return
		}
		if st, ok := c.states[ev.ID]; !ok || st.rev < ev.Record.Rev {
			c.setState(ev.ID, planState{rev: ev.Record.Rev, state: p.State})
		}
	}
	if ev.Through > 0 && k.watchFrom > 0 {
		k.watchThrough = max(k.watchThrough, ev.Through)
	}
}

// planWatchEnded forgets the leader's plan watch (its term ended).
func (c *Control) planWatchEnded() {
	c.decodedMu.Lock()
	defer c.decodedMu.Unlock()
	c.known.watchFrom, c.known.watchThrough = 0, 0
}

// setState remembers st for plan id. c.decodedMu must be held.
func (c *Control) setState(id string, st planState) {
	if len(c.states) > 4*c.keep {
		c.states = nil
		c.known.readRev = 0 // forgotten: complete no more
	}
	if c.states == nil {
		c.states = map[string]planState{}
	}
	c.states[id] = st
}

// readAt records that c.states holds the state of every plan record revs
// lists, as read at revision at (or later), and forgets plans deleted by
// then. c.decodedMu must be held.
func (c *Control) readAt(at int64, revs map[string]int64) {
	for id, st := range c.states {
		if _, ok := revs[id]; !ok && st.rev <= at {
			delete(c.states, id)
		}
	}
	c.known.readRev = max(c.known.readRev, at)
}

// plansIdle reports whether c.states knows of no applying or paused plan,
// and through which revision it knows every plan record: a read of the
// plan keys (Active) after the leader's plan watch began, and the watch
// since. ok is false when it does not know (no watch in this process, or
// no read since it began, or some plan is active: Active says which).
func (c *Control) plansIdle() (through int64, ok bool) {
	c.decodedMu.Lock()
	defer c.decodedMu.Unlock()
	k := c.known
	if k.watchFrom == 0 || k.readRev < k.watchFrom {
		return 0, false
	}
	for _, st := range c.states {
		if st.state.Active() {
			return 0, false
		}
	}
	return max(k.readRev, k.watchThrough), true
}

// plansKnown is how complete c.states is (guarded by decodedMu).
type plansKnown struct {
	// watchFrom is the revision after which the leader's plan watch in
	// this process delivers every write (0: no watch), watchThrough the
	// revision up to which it has.
	watchFrom, watchThrough int64
	// readRev is the revision at which Active last read every plan key
	// and learned the state of every record it listed (0: none since
	// the states were forgotten).
	readRev int64
}

// planState is what Active remembers of a plan record.
type planState struct {
	rev   int64
	state PlanState
}

func activeOf(plans []*Plan) *Plan {
	for _, p := range plans {
		if p.State.Active() {
			return p
		}
	}
	return nil
}

// update rewrites a stored plan by compare-and-swap.
func (c *Control) update(ctx context.Context, id string, edit func(*Plan) error) error {
	return c.updateRun(ctx, id, func(p *Plan) (directory.Run, error) { return directory.RunKeep, edit(p) })
}

// updateRun is update where edit also says what becomes of the plan's run
// key, in the same transaction as the new record: a pause or cancel stops
// every begin of the plan's moves at once, however many are queued.
func (c *Control) updateRun(ctx context.Context, id string, edit func(*Plan) (directory.Run, error)) error {
	err := c.dir.UpdatePlanRun(ctx, id, func(old []byte) ([]byte, directory.Run, error) {
		p, err := decodePlan(old)
		if err != nil {
			return nil, 0, err
		}
		run, err := edit(p)
		if err != nil {
			return nil, 0, err
		}
		p.Updated = c.now().UTC()
		b, err := encodePlan(p)
		return b, run, err
	})
	if errors.Is(err, directory.ErrNotFound) {
		return fmt.Errorf("%w: no plan %q", ErrNotFound, id)
	}
	return err
}
