package directory

import (
	"context"
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// attemptTimeout bounds one etcd request of a write: a fifth of
// RequestTimeout (1s by default, about an etcd election), at least 100ms
// (or RequestTimeout when that is shorter). writeGroup retries attempts
// that fail for want of etcd until RequestTimeout has passed.
func (d *Directory) attemptTimeout() time.Duration {
	return max(d.cfg.RequestTimeout/5, min(100*time.Millisecond, d.cfg.RequestTimeout))
}

// unknownTxn is a write's txn that etcd did not answer: sent at base, it
// would have written changes for reqs at versions results.
type unknownTxn struct {
	base    uint64
	changes []pendingChange
	reqs    []*groupReq
	results []uint64
}

// appliedOf returns the unknown txn that applied, if the table (now at
// version) moved past the base of one: the history entries at base+1..
// are then either that txn's (kind, move, node, author and the time it
// stamped on them) or another writer's, in which case it never will apply.
// An entry that cannot be decoded counts as not this write's; an error is
// a read that failed, so nothing is known yet.
func (d *Directory) appliedOf(ctx context.Context, version uint64, unknown []unknownTxn) (unknownTxn, bool, error) {
	for _, u := range unknown {
		n := uint64(len(u.changes))
		if version < u.base+n {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, d.attemptTimeout())
		resp, err := d.cli.Get(rctx, d.k.history(u.base+1), clientv3.WithRange(d.k.history(u.base+n+1)))
		cancel()
		if err != nil {
			return unknownTxn{}, false, fromEtcd(ctx, "read history", err)
		}
		if uint64(len(resp.Kvs)) != n {
			continue
		}
		same := true
		for i, kv := range resp.Kvs {
			var r changeRec
			if json.Unmarshal(kv.Value, &r) != nil {
				same = false
				break
			}
			got, err := r.change()
			want := u.changes[i].change
			if err != nil || got.Version != want.Version || got.Kind != want.Kind || got.MoveID != want.MoveID ||
				got.Node != want.Node || got.By != want.By || !got.At.Equal(want.At) {
				same = false
				break
			}
		}
		if same {
			return u, true, nil
		}
	}
	return unknownTxn{}, false, nil
}

// auditDone marks the audit entries of changes, just written, as done.
func (d *Directory) auditDone(changes []pendingChange) {
	for _, c := range changes {
		if k := auditKindOf(c.change.Kind); k != "" {
			if c.audit != nil && c.audit.e.Kind == k {
				c.audit.done.Store(true)
			}
			d.audited(k, 1)
		}
	}
}
