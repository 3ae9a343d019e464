package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/slotd/slotd/slots"
)

// failingStore fails the Apply of batches holding a chosen key, and can
// hold an Apply until released.
type failingStore struct {
	*memStore
	mu   sync.Mutex // guards fail
	fail string     // a batch holding this key fails
}

var errDisk = errors.New("disk on fire")

func (f *failingStore) Apply(ctx context.Context, s slots.Slot, batch []Mutation) error {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	for _, m := range batch {
		if string(m.Key) == fail {
			return errDisk
		}
	}
	return f.memStore.Apply(ctx, s, batch)
}

// TestImportAppliesBatchesBehindTheCall: a snapshot batch other than the
// last is applied after its Import returns. What the mover relies on
// holds: ImportStatus reports every batch whose Import returned, the last
// batch's Import returns with every batch in the store, and a batch that
// failed after its call returned fails the move's next batch (not a
// resume of itself, and not another move's).
func TestImportAppliesBatchesBehindTheCall(t *testing.T) {
	ctx := context.Background()
	s := slots.ForString("{imp}")
	key := func(i int) []byte { return fmt.Appendf(nil, "{imp}:%03d", i) }
	batch := func(seq uint64, from, to int, done bool) SnapshotBatch {
		b := SnapshotBatch{BatchSeq: seq, Cursor: append([]byte{1}, key(to-1)...), SnapshotSeq: 5, Done: done}
		for i := from; i < to; i++ {
			b.Entries = append(b.Entries, Entry{Key: key(i), Value: []byte("v")})
		}
		return b
	}
	newNode := func(t *testing.T) (*Node, *failingStore) {
		st := &failingStore{memStore: newMemStore()}
		m := new(StaticMap)
		m.SetAll("b", "127.0.0.1:2") // a owns nothing: it may import
		return newTestNode(t, st, m, t.TempDir()), st
	}

	t.Run("status and the last batch see every batch", func(t *testing.T) {
		n, st := newNode(t)
		for seq := uint64(1); seq <= 3; seq++ {
			if _, _, err := n.ImportSnapshot(ctx, s, "m1", batch(seq, int(seq-1)*10, int(seq)*10, false)); err != nil {
				t.Fatal(err)
			}
			if got := n.ImportStatus(s, "m1"); got.LastBatchSeq != seq || string(got.Cursor) != string(append([]byte{1}, key(int(seq)*10-1)...)) {
				t.Fatalf("status after batch %d returned: %+v", seq, got)
			}
		}
		got, _, err := n.ImportSnapshot(ctx, s, "m1", batch(4, 30, 40, true))
		if err != nil {
			t.Fatal(err)
		}
		if !got.SnapshotDone || got.LastBatchSeq != 4 {
			t.Fatalf("state after the last batch: %+v", got)
		}
		if keys, _, _ := st.SlotSize(ctx, s); keys != 40 {
			t.Fatalf("store holds %d keys after the last batch returned, want 40", keys)
		}
		// Changes after the snapshot see it complete.
		if _, _, err := n.ImportChanges(ctx, s, "m1", []Change{{Seq: 6, Mutation: Mutation{Key: key(0), Value: []byte("w")}}}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a failed apply fails the next batch", func(t *testing.T) {
		n, st := newNode(t)
		if _, _, err := n.ImportSnapshot(ctx, s, "m1", batch(1, 0, 10, false)); err != nil {
			t.Fatal(err)
		}
		st.mu.Lock()
		st.fail = string(key(15))
		st.mu.Unlock()
		// Batch 2 is accepted; its apply fails behind the call.
		if _, _, err := n.ImportSnapshot(ctx, s, "m1", batch(2, 10, 20, false)); err != nil {
			t.Fatalf("batch 2: %v (its apply runs after the call)", err)
		}
		_, _, err := n.ImportSnapshot(ctx, s, "m1", batch(3, 20, 30, false))
		if !errors.Is(err, errDisk) {
			t.Fatalf("batch 3 after batch 2 failed: %v, want the apply's error", err)
		}
		if got := n.ImportStatus(s, "m1"); got.LastBatchSeq != 1 {
			t.Fatalf("status after the failure: %+v, want batch 1", got)
		}
		// A resume from the status sends batch 2 again: it applies.
		st.mu.Lock()
		st.fail = ""
		st.mu.Unlock()
		if _, _, err := n.ImportSnapshot(ctx, s, "m1", batch(2, 10, 20, false)); err != nil {
			t.Fatalf("batch 2 resent: %v", err)
		}
		if _, _, err := n.ImportSnapshot(ctx, s, "m1", batch(3, 20, 30, true)); err != nil {
			t.Fatal(err)
		}
		if keys, _, _ := st.SlotSize(ctx, s); keys != 30 {
			t.Fatalf("store holds %d keys, want 30", keys)
		}
	})

	t.Run("a failure is not another move's", func(t *testing.T) {
		n, st := newNode(t)
		st.mu.Lock()
		st.fail = string(key(5))
		st.mu.Unlock()
		if _, _, err := n.ImportSnapshot(ctx, s, "m1", batch(1, 0, 10, false)); err != nil {
			t.Fatal(err)
		}
		st.mu.Lock()
		st.fail = ""
		st.mu.Unlock()
		if _, _, err := n.ImportSnapshot(ctx, s, "m2", batch(1, 10, 20, true)); err != nil {
			t.Fatalf("a new move after another's failed apply: %v", err)
		}
	})
}
