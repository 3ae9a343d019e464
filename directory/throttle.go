package directory

import (
	"cmp"
	"context"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The mover keeps a little state of its own in etcd, outside the versioned
// table (changing it moves no slot, so it bumps no version): the throttle
// here and its plans (planstore.go). The directory stores it so that every
// key stays in keys.go.

// SetThrottle stores the mover's throttle in bytes per second per donor
// (0 means the mover's default), with a cluster audit entry in the same txn
// (the one attached with WithAudit, if any, for who and why).
func (d *Directory) SetThrottle(ctx context.Context, bytesPerSec int64) error {
	if bytesPerSec < 0 {
		return fmt.Errorf("set throttle: %w: %d bytes/s is negative", ErrInvalid, bytesPerSec)
	}
	if pendingFrom(ctx, AuditCluster) == nil {
		ctx = WithAudit(ctx, AuditEntry{Kind: AuditCluster, Action: ActionThrottle})
	}
	audit, written, err := d.auditOps(ctx, func(e *AuditEntry) {
		e.Detail = cmp.Or(e.Detail, fmt.Sprintf("%d bytes/s per donor", bytesPerSec))
	}, AuditCluster)
	if err != nil {
		return fmt.Errorf("set throttle: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	ops := append([]clientv3.Op{clientv3.OpPut(d.k.throttle(), strconv.FormatInt(bytesPerSec, 10))}, audit...)
	_, err = d.cli.Txn(rctx).Then(ops...).Commit()
	written(err == nil)
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
// with the current value, until ctx is done; then it returns ctx.Err().
// set is false while no throttle is set (at the start, or after the key
// was deleted): the caller's default applies, and it need not read the
// key itself to learn that.
func (d *Directory) WatchThrottle(ctx context.Context, fn func(bytesPerSec int64, set bool)) error {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	resp, err := d.cli.Get(rctx, d.k.throttle())
	cancel()
	if err != nil {
		return fromEtcd(ctx, "read throttle", err)
	}
	if len(resp.Kvs) == 1 {
		if v, err := parseThrottle(resp.Kvs[0].Value); err == nil {
			fn(v, true)
		}
	} else {
		fn(0, false)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	for wr := range d.cli.Watch(wctx, d.k.throttle(), clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			return fromEtcd(ctx, "watch throttle", err)
		}
		for _, ev := range wr.Events {
			if ev.Type != mvccpb.PUT {
				fn(0, false)
				continue
			}
			if v, err := parseThrottle(ev.Kv.Value); err == nil {
				fn(v, true)
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
