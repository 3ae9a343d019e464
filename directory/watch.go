package directory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/internal/backoff"
)

// errCompacted means the etcd watch could not resume: the revisions it
// needed were compacted away.
var errCompacted = errors.New("watch revision compacted")

// Watch calls fn with consistent snapshots in version order: first the
// current table if its version is greater than fromVersion, then one
// snapshot per later write. Every version written is delivered (a write that
// group-committed several concurrent changes advances the version by as
// many, and only its last version was ever a state of the table) unless the
// watcher fell so far behind that etcd compacted the revisions in between; then it
// gets a fresh full snapshot (a jump in Version) and goes on, never an error
// loop. Before Bootstrap it waits for the table to exist. It survives etcd
// restarts (the client reconnects and resumes). It returns when ctx is done
// (ctx.Err()), when fn returns an error (that error), or on a schema this
// process does not support. fn runs on Watch's goroutine; a slow fn delays
// the next delivery, nothing is dropped.
func (d *Directory) Watch(ctx context.Context, fromVersion uint64, fn func(*Snapshot) error) error {
	last := fromVersion
	bo := backoff.Backoff{Initial: 10 * time.Millisecond, Max: 2 * time.Second}
	for {
		st, rev, err := d.read(ctx)
		if err == nil {
			err = d.checkSchema(st)
			if err != nil {
				return fmt.Errorf("watch: %w", err)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// etcd unreachable: keep trying, the caller decides when to stop.
			wait := bo.Next()
			d.lg.Warn("directory watch cannot read the table; retrying", "err", err, "backoff", wait)
			if !backoff.SleepContext(ctx, wait) {
				return ctx.Err()
			}
			continue
		}
		bo.Reset()
		if st.bootstrapped() && st.version > last {
			if err := fn(st.snapshot()); err != nil {
				return err
			}
			last = st.version
		}
		if d.afterWatchRead != nil {
			d.afterWatchRead()
		}
		err = d.follow(ctx, st, rev+1, &last, fn)
		if errors.Is(err, errCompacted) {
			d.lg.Info("directory watch fell behind compaction; resending the full table", "last_version", last)
			continue
		}
		return err
	}
}

// follow applies etcd events from rev on to st and delivers a snapshot at
// the end of every revision that bumped the version past *last.
func (d *Directory) follow(ctx context.Context, st *state, rev int64, last *uint64, fn func(*Snapshot) error) error {
	for {
		// Cancelling wctx releases the etcd watcher and its goroutines,
		// on return and before a resumed watch replaces it.
		wctx, cancel := context.WithCancel(ctx)
		err := d.followOnce(wctx, st, &rev, last, fn)
		cancel()
		if !errors.Is(err, errResume) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// errResume asks follow to open a new etcd watch from the current revision.
var errResume = errors.New("resume watch")

// followOnce runs one etcd watch from *rev, advancing *rev past every
// revision it applies.
func (d *Directory) followOnce(ctx context.Context, st *state, rev *int64, last *uint64, fn func(*Snapshot) error) error {
	wch := d.cli.Watch(ctx, d.k.all(), clientv3.WithPrefix(), clientv3.WithRev(*rev))
	for resp := range wch {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			return errCompacted
		}
		if err := resp.Err(); err != nil {
			// Anything else (e.g. the watch was cancelled by the server):
			// open a new watch from where we are.
			d.lg.Warn("directory watch interrupted; resuming", "err", err, "revision", *rev)
			return errResume
		}
		evs := resp.Events
		for i, ev := range evs {
			switch ev.Type {
			case mvccpb.PUT:
				if err := st.apply(d.k, ev.Kv); err != nil {
					return fmt.Errorf("watch: %w", err)
				}
			case mvccpb.DELETE:
				st.remove(d.k, string(ev.Kv.Key))
			}
			// One txn is one revision, and etcd never splits a revision
			// across responses: the end of a revision is a consistent table.
			if i+1 < len(evs) && evs[i+1].Kv.ModRevision == ev.Kv.ModRevision {
				continue
			}
			*rev = ev.Kv.ModRevision + 1
			if err := d.checkSchema(st); err != nil {
				return fmt.Errorf("watch: %w", err)
			}
			if st.bootstrapped() && st.version > *last {
				d.m.setVersion(st.version)
				if err := fn(st.snapshot()); err != nil {
					return err
				}
				*last = st.version
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errResume
}
