package directory

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The primitives below exist for package migrations, which decides which
// steps run and in what order, while the directory keeps the only
// knowledge of where things live in etcd.

// lockTTL is the TTL (seconds) of the session that holds a lock: a process
// that dies while holding it releases it after this long.
const lockTTL = 10

// Schema returns the schema version stored in etcd, 0 when there is none.
func (d *Directory) Schema(ctx context.Context) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.schema())
	if err != nil {
		return 0, fromEtcd(ctx, "read schema", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	n, err := strconv.Atoi(string(resp.Kvs[0].Value))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("directory: schema key holds %q, not a schema version", resp.Kvs[0].Value)
	}
	return n, nil
}

// SetSchema changes the stored schema version from from to to, atomically:
// ErrConflict if it is neither from nor already to.
func (d *Directory) SetSchema(ctx context.Context, from, to int) error {
	if from < 0 || to <= from {
		return fmt.Errorf("set schema: %w: %d -> %d does not go forward", ErrInvalid, from, to)
	}
	cmp := clientv3.Compare(clientv3.Value(d.k.schema()), "=", strconv.Itoa(from))
	if from == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(d.k.schema()), "=", 0)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Txn(rctx).If(cmp).Then(clientv3.OpPut(d.k.schema(), strconv.Itoa(to))).Commit()
	if err != nil {
		return fromEtcd(ctx, "set schema", err)
	}
	if resp.Succeeded {
		d.lg.Info("directory schema changed", "from", from, "to", to)
		return nil
	}
	cur, err := d.Schema(ctx)
	if err != nil {
		return err
	}
	if cur == to {
		return nil
	}
	return fmt.Errorf("set schema %d -> %d: %w: schema is %d", from, to, ErrConflict, cur)
}

// InitLayout creates what schema 1 needs before any change: the version key,
// at 0. It is idempotent.
func (d *Directory) InitLayout(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	_, err := d.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(d.k.version()), "=", 0)).
		Then(clientv3.OpPut(d.k.version(), "0")).
		Commit()
	return fromEtcd(ctx, "init layout", err)
}

// WithLock runs fn while holding the etcd lock called name (a
// concurrency.Mutex under the directory's prefix), so that one process at a
// time runs it across every process sharing the etcd. fn's context is
// cancelled if the lock's session is lost.
func (d *Directory) WithLock(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	if err := checkID("lock name", name); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	s, err := concurrency.NewSession(d.cli, concurrency.WithTTL(lockTTL), concurrency.WithContext(ctx))
	if err != nil {
		return fromEtcd(ctx, "lock "+name, err)
	}
	// Shutdown order: 1. unlock (deferred last, runs first), 2. close the
	// session, revoking its lease.
	defer s.Close()
	mu := concurrency.NewMutex(s, d.k.lock(name))
	if err := mu.Lock(ctx); err != nil {
		return fromEtcd(ctx, "lock "+name, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), d.cfg.RequestTimeout)
		defer cancel()
		_ = mu.Unlock(uctx) // closing the session releases it anyway
	}()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.Done():
			cancel()
		case <-lctx.Done():
		}
	}()
	return fn(lctx)
}

// ReindexNodes renumbers the node indexes 0..n-1 in id order and rewrites
// every owners chunk to match, in one versioned change that keeps every
// slot's owner. It refuses (ErrPrecondition) a table with replica sets
// stored. It reclaims the index holes left by removed nodes, and is
// idempotent: nothing happens when the indexes are already in order.
func (d *Directory) ReindexNodes(ctx context.Context, by string) (uint64, error) {
	return d.update(ctx, "reindex nodes", updateOpts{}, func(st *state, m *mutation) error {
		ids := slices.Sorted(maps.Keys(st.nodes))
		remap := make(map[uint16]uint16, len(ids))
		moved := false
		for i, id := range ids {
			n := st.nodes[id]
			remap[n.Index] = uint16(i)
			if n.Index != uint16(i) {
				moved = true
			}
		}
		if !moved {
			return nil
		}
		if n := st.storedSets(); n > 0 {
			// Their chunks and the owners' would not fit one transaction.
			return fmt.Errorf("%w: %d slots have replica sets stored; renumbering nodes rewrites only owners", ErrPrecondition, n)
		}
		for i, id := range ids {
			st.nodes[id].Index = uint16(i)
			m.node(id)
		}
		if st.bootstrapped() {
			for s, o := range st.owners {
				nw, ok := remap[o]
				if !ok {
					return fmt.Errorf("%w: slot %d is owned by unknown node index %d", ErrPrecondition, s, o)
				}
				st.owners[s] = nw
			}
			for c := range chunks {
				m.chunks[c] = true
			}
		}
		m.change = Change{Kind: ChangeReindexNodes, Reason: fmt.Sprintf("%d nodes renumbered in id order", len(ids)), By: by}
		return nil
	})
}

// Logger returns the directory's logger, for the code that drives these
// primitives (migrations) to log alongside.
func (d *Directory) Logger() *slog.Logger { return d.lg }
