package directory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/slotd/slotd/internal/backoff"
)

// Group commit. Updates that arrive while another is being written are
// queued, and the caller that finds the queue idle writes them all, in
// arrival order, as one etcd transaction (each change keeps its own version
// and history entry; the version advances by the number of changes). A
// mover running several moves at once then pays one round trip for all the
// phase changes that are ready, instead of one each plus lost races:
// concurrent compare-and-swap writers on one version key otherwise retry
// each other into the ground.
//
// Semantics per update are those of a serial update: its fn sees the state
// left by the updates before it in the group, and fails alone. Only an etcd
// error fails the whole group (each caller then re-reads, as after any
// uncertain write).

// maxGroup bounds the changes written in one transaction (etcd's default
// limit is 128 operations per txn; a change writes at most a handful).
const maxGroup = 16

// groupReq is one update waiting to be written.
type groupReq struct {
	op            string
	expect        uint64
	needBootstrap bool
	alone         bool
	fn            func(st *state, m *mutation) error
	// audit is the caller's audit entry for its change (WithAudit), if any.
	audit *pendingAudit

	// Set when settled, before done is closed.
	version uint64
	err     error
	settled bool
	// lead is set, under combiner.mu, when this waiter is to write the
	// queue after the previous writer settled its own group.
	lead bool
	wake chan struct{} // closed when settled or promoted to lead
}

// combiner is the queue of updates waiting for the writer.
type combiner struct {
	mu    sync.Mutex
	queue []*groupReq
	busy  bool // a caller is writing the queue
}

// update is the one way the table changes: fn checks its preconditions on
// the state and changes it in place (marking what it touched in m); the
// touched keys, the new version and a history entry are written in one txn
// that compares the version key's mod revision and the schema. A lost race
// re-reads and retries (fn re-checks everything on the fresh state) with
// capped jittered backoff, so only a caller with an explicit expectation,
// or one that loses every attempt, sees ErrConflict. An fn that touches
// nothing is a no-op: no version bump. It returns the version after the
// change, or the version it saw for a no-op.
//
// An update with an expectation is written alone (its compare is the
// caller's); others are group-committed (see above).
func (d *Directory) update(ctx context.Context, op string, o updateOpts, fn func(st *state, m *mutation) error) (uint64, error) {
	r := &groupReq{op: op, expect: o.expect, needBootstrap: o.needBootstrap, alone: o.alone, fn: fn, wake: make(chan struct{}),
		audit: pendingFrom(ctx, AuditNode, AuditCluster)}
	if o.expect != 0 || o.alone {
		d.writeGroup(ctx, []*groupReq{r})
		return r.version, r.err
	}
	c := &d.group
	c.mu.Lock()
	c.queue = append(c.queue, r)
	if c.busy {
		c.mu.Unlock()
		select {
		case <-r.wake:
		case <-ctx.Done():
			c.mu.Lock()
			if i := slices.Index(c.queue, r); i >= 0 && !r.lead {
				// Not taken by a writer yet: withdraw, nothing was written.
				c.queue = slices.Delete(c.queue, i, i+1)
				c.mu.Unlock()
				return 0, fmt.Errorf("directory: %s: %w", op, ctx.Err())
			}
			c.mu.Unlock()
			// Taken: the outcome is at most one write away.
			<-r.wake
		}
		c.mu.Lock()
		lead := r.lead
		c.mu.Unlock()
		if !lead {
			return r.version, r.err
		}
	} else {
		c.busy = true
		c.mu.Unlock()
	}
	// This caller writes groups from the head of the queue until its own
	// update is settled, then hands the queue to the next waiter, so no
	// caller serves others forever.
	for !r.settled {
		c.mu.Lock()
		n := min(len(c.queue), maxGroup)
		batch := slices.Clone(c.queue[:n])
		c.queue = slices.Delete(c.queue, 0, n)
		c.mu.Unlock()
		// The write serves other callers too: it must not stop because this
		// one gave up. Each etcd request is bounded by RequestTimeout.
		d.writeGroup(context.WithoutCancel(ctx), batch)
		for _, q := range batch {
			if q != r {
				close(q.wake)
			}
		}
	}
	c.mu.Lock()
	if len(c.queue) > 0 {
		next := c.queue[0]
		next.lead = true
		close(next.wake)
	} else {
		c.busy = false
	}
	c.mu.Unlock()
	return r.version, r.err
}

// pendingChange is one history entry of a group.
type pendingChange struct {
	change  Change
	hasSlot bool
	audit   *pendingAudit // the caller's audit entry, if any
}

// writeGroup applies batch, in order, to the table and writes the result as
// one txn, retrying lost races; it settles every request of the batch.
//
// A txn etcd does not answer in time (a member that lost its leadership,
// an election under way) is retried on short attempts until RequestTimeout
// has passed since the group began, so the write lands as soon as etcd has
// a leader. Such a txn may still apply after it failed: it is kept as
// unknown, and each fresh read after it checks, by the history entries it
// would have written, whether it did. At most one txn applies at a version
// (each compares the version key's revision), so the write is applied
// once and its callers get its outcome, never the outcome of a retry that
// found its own effect ("no such move").
func (d *Directory) writeGroup(ctx context.Context, batch []*groupReq) {
	settle := func(r *groupReq, v uint64, err error) {
		r.version, r.err, r.settled = v, err, true
	}
	live := func() []*groupReq {
		return slices.DeleteFunc(slices.Clone(batch), func(r *groupReq) bool { return r.settled })
	}
	failAll := func(err error) {
		for _, r := range live() {
			settle(r, 0, fmt.Errorf("%s: %w", r.op, err))
		}
	}
	deadline := time.Now().Add(d.cfg.RequestTimeout)
	retryable := func(err error) bool {
		return ctx.Err() == nil && time.Now().Before(deadline) &&
			(errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded))
	}
	var unknown []unknownTxn // txns sent without an answer
	// Full jitter: concurrent losers spread out instead of colliding again.
	bo := backoff.Backoff{Initial: 5 * time.Millisecond, Max: 200 * time.Millisecond, Jitter: 1}
	var st *state
	if batch[0].expect == 0 {
		st = d.cache.Swap(nil)
	}
	for attempt := 1; ; attempt++ {
		reqs := live()
		if len(reqs) == 0 {
			return
		}
		cached := st != nil
		if !cached {
			var err error
			rctx, cancel := context.WithTimeout(ctx, d.attemptTimeout())
			st, _, err = d.read(rctx)
			cancel()
			if err != nil {
				if retryable(err) && backoff.SleepContext(ctx, bo.Next()) {
					attempt--
					continue
				}
				failAll(err)
				return
			}
			u, ok, err := d.appliedOf(ctx, st.version, unknown)
			if err != nil {
				if retryable(err) && backoff.SleepContext(ctx, bo.Next()) {
					st = nil
					attempt--
					continue
				}
				failAll(err)
				return
			}
			if ok {
				d.m.unknownWrites("applied")
				for i, r := range u.reqs {
					if !r.settled {
						settle(r, u.results[i], nil)
					}
				}
				d.auditDone(u.changes)
				return
			}
			unknown = slices.DeleteFunc(unknown, func(u unknownTxn) bool { return st.version > u.base })
		}
		st.cached = cached
		if err := d.checkSchema(st); err != nil {
			st = nil
			if cached {
				attempt--
				continue
			}
			failAll(err)
			return
		}
		// Apply every live request in order. A request that fails on a
		// fresh state is settled with its error; one that fails on the
		// cached state (which may only be stale) is re-checked on a fresh
		// read. Either way fn may have changed st before failing, so the
		// group starts over from a fresh read without it.
		m := newMutation()
		var changes []pendingChange
		base := st.version
		results := make([]uint64, len(reqs))
		restart := false
		for i, r := range reqs {
			v := base + uint64(len(changes))
			var err error
			switch {
			case r.expect != 0 && st.version != r.expect:
				d.m.conflict()
				settle(r, 0, fmt.Errorf("%s: %w: expected version %d, directory is at %d", r.op, ErrConflict, r.expect, st.version))
				continue
			case r.needBootstrap && !st.bootstrapped():
				err = fmt.Errorf("%w; run bootstrap first", ErrNotBootstrapped)
			default:
				sub := newMutation()
				st.next = v + 1
				if err = r.fn(st, sub); err == nil && !sub.empty() {
					sub.change.Version = v + 1
					changes = append(changes, pendingChange{sub.change, sub.hasSlot, r.audit})
					m.merge(sub)
					v++
				}
			}
			if err != nil {
				if !cached {
					settle(r, 0, fmt.Errorf("%s: %w", r.op, err))
				}
				restart = true
				break
			}
			results[i] = v
		}
		if restart {
			st = nil
			if cached {
				attempt-- // a stale cache is not a lost race
			}
			continue
		}
		if len(changes) == 0 {
			d.cache.Store(st)
			for i, r := range reqs {
				if !r.settled {
					settle(r, results[i], nil)
				}
			}
			return
		}
		ok, rev, err := d.commit(ctx, st, m, changes)
		if err != nil && retryable(err) {
			// No answer: the txn may yet apply. Re-read and find out.
			d.m.unknownWrites("sent")
			unknown = append(unknown, unknownTxn{base: base, changes: changes, reqs: reqs, results: results})
			st = nil
			attempt-- // not a lost race
			if !backoff.SleepContext(ctx, bo.Next()) {
				failAll(ctx.Err())
				return
			}
			continue
		}
		if err != nil {
			failAll(err)
			return
		}
		if ok {
			v := base + uint64(len(changes))
			// Bring what the read would have derived in line with the write.
			st.hasVersion, st.version, st.versionRev = true, v, rev
			for c := range m.chunks {
				st.haveChunk[c] = true
			}
			d.cache.Store(st)
			d.m.setVersion(v)
			d.m.grouped(len(changes))
			d.auditDone(changes)
			for i, r := range reqs {
				if !r.settled {
					settle(r, results[i], nil)
				}
			}
			d.lg.Debug("directory changed", "version", v, "changes", len(changes), "first", changes[0].change.Kind, "op", reqs[0].op)
			return
		}
		seen := st.version
		st = nil
		if cached {
			attempt-- // a stale cache is not a lost race
			continue
		}
		d.m.conflict()
		for _, r := range reqs {
			if r.expect != 0 || r.alone {
				settle(r, 0, fmt.Errorf("%s: %w: the directory changed at version %d while writing; re-read and retry", r.op, ErrConflict, seen))
			}
		}
		if len(live()) == 0 {
			return // every request expected this table: no retry to wait for
		}
		if attempt >= d.cfg.UpdateAttempts {
			failAll(fmt.Errorf("%w: lost %d compare-and-swap races at version %d; re-read and retry", ErrConflict, attempt, seen))
			return
		}
		if !backoff.SleepContext(ctx, bo.Next()+time.Millisecond) {
			failAll(ctx.Err())
			return
		}
	}
}
