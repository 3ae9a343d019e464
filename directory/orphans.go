package directory

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// SetOrphanBytes records what node id reported with its heartbeat: the
// bytes it holds that nothing in the directory explains. The figure is
// kept in the node's liveness record, so it goes when the lease does and
// every replica shows the same. It writes only when the figure changed,
// and does nothing while the node has no live lease (the next heartbeat
// opens one). It does not change the version.
func (d *Directory) SetOrphanBytes(ctx context.Context, id string, bytes int64) error {
	if err := checkID("node id", id); err != nil {
		return fmt.Errorf("orphan bytes: %w", err)
	}
	if bytes < 0 {
		return fmt.Errorf("%w: orphan bytes of %s: %d is negative", ErrInvalid, id, bytes)
	}
	op := "orphan bytes of " + id
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.alive(id))
	if err != nil {
		return fromEtcd(ctx, op, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	kv := resp.Kvs[0]
	var a aliveRec
	if err := json.Unmarshal(kv.Value, &a); err != nil {
		return fmt.Errorf("directory: %s: %w", op, err)
	}
	if a.OrphanBytes != nil && *a.OrphanBytes == bytes {
		return nil
	}
	a.OrphanBytes = &bytes
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("directory: %s: %w", op, err)
	}
	// Same key, same lease (IgnoreLease keeps it), unless it changed since.
	_, err = d.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.ModRevision(d.k.alive(id)), "=", kv.ModRevision)).
		Then(clientv3.OpPut(d.k.alive(id), string(b), clientv3.WithIgnoreLease())).
		Commit()
	if err != nil {
		return fromEtcd(ctx, op, err)
	}
	return nil
}
