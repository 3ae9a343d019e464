package directory

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/slots"
)

// TestCommitWithoutAnswer: a move's commit whose txn etcd does not answer
// in time (the answer lost after it applied, a txn that did not apply,
// one that applies after the retry was sent, or etcd gone for good) ends
// exactly as the directory then stands: committed once, with one history
// entry, and the caller gets the commit's version, never "no such move".
func TestCommitWithoutAnswer(t *testing.T) {
	lost := errors.New("etcdserver: request timed out")
	type txnFn = func(context.Context) (*clientv3.TxnResponse, error)
	tests := []struct {
		name string
		// hook runs the commit's n-th txn (from 1); late holds a txn for
		// the next call to run first.
		hook      func(n int, ctx context.Context, txn txnFn, late *txnFn) (*clientv3.TxnResponse, error)
		wantErr   error
		committed bool
	}{
		{"the answer is lost after the write", func(n int, ctx context.Context, txn txnFn, _ *txnFn) (*clientv3.TxnResponse, error) {
			if n == 1 {
				if _, err := txn(ctx); err != nil {
					return nil, err
				}
				return nil, lost
			}
			return txn(ctx)
		}, nil, true},
		{"the first txn never reaches etcd", func(n int, ctx context.Context, txn txnFn, _ *txnFn) (*clientv3.TxnResponse, error) {
			if n == 1 {
				return nil, lost
			}
			return txn(ctx)
		}, nil, true},
		{"the first txn applies after the retry was sent", func(n int, ctx context.Context, txn txnFn, late *txnFn) (*clientv3.TxnResponse, error) {
			switch n {
			case 1:
				*late = txn
				return nil, lost
			case 2:
				if _, err := (*late)(context.Background()); err != nil {
					return nil, err
				}
			}
			return txn(ctx)
		}, nil, true},
		{"etcd never answers", func(int, context.Context, txnFn, *txnFn) (*clientv3.TxnResponse, error) {
			return nil, lost
		}, ErrUnavailable, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, d, snap := setup(t, 3, func(c *Config) { c.RequestTimeout = 2 * time.Second })
			ctx := testCtx(t)
			s := slots.MustNew(ownerSlot(t, snap, "n0"))
			if _, err := d.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: "n2", MoveID: "m1"}); err != nil {
				t.Fatal(err)
			}
			before := mustVersion(t, d)
			var mu sync.Mutex
			n := 0
			var late txnFn
			d.txnHook = func(ctx context.Context, txn txnFn) (*clientv3.TxnResponse, error) {
				mu.Lock()
				defer mu.Unlock()
				n++
				return tc.hook(n, ctx, txn, &late)
			}
			v, err := d.CommitFencedMove(ctx, s, "m1", "test", Copied{})
			d.txnHook = nil
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("CommitFencedMove = %d, %v; want error %v", v, err, tc.wantErr)
			}
			after, err := d.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			owner := after.Owner(s)
			hist, err := d.HistorySince(ctx, before, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.committed {
				if owner != "n0" || len(hist) != 0 || after.Version != before {
					t.Fatalf("nothing may change: owner %s, %d history entries, version %d -> %d", owner, len(hist), before, after.Version)
				}
				return
			}
			if owner != "n2" || len(hist) != 1 || hist[0].Kind != ChangeMoveCommit || hist[0].Version != v || after.Version != before+1 {
				t.Fatalf("want one commit at version %d: owner %s, history %+v, version %d -> %d", v, owner, hist, before, after.Version)
			}
		})
	}
}
