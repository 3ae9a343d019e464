package node

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/slots"
)

// waitingForPrevious blocks until an import of slot s waits for its
// predecessor (importChanged was asked for), or fails the test if the
// import returned first with errc's error.
func waitingForPrevious(t *testing.T, n *Node, s slots.Slot, errc <-chan error) {
	t.Helper()
	for {
		n.impMu.Lock()
		waiting := n.importWake[s] != nil
		n.impMu.Unlock()
		if waiting {
			return
		}
		select {
		case err := <-errc:
			t.Fatalf("batch 2 returned (%v) instead of waiting for batch 1", err)
		default:
			runtime.Gosched()
		}
	}
}

// TestImportAfterPrevious: a snapshot batch sent before its predecessor
// was answered (AfterPrevious) waits for it and is applied after it, in
// order; without the flag, or further ahead than the next but one, a gap
// is refused as before; a waiting batch whose call is cancelled applies
// nothing.
func TestImportAfterPrevious(t *testing.T) {
	// Keys tagged {ap} are all in slot s.
	key := func(s slots.Slot, i int) []byte { return fmt.Appendf(nil, "{ap}:%d", i) }
	s := slots.ForString("{ap}")
	batch := func(seq uint64, after, done bool) SnapshotBatch {
		return SnapshotBatch{BatchSeq: seq, AfterPrevious: after, Done: done, SnapshotSeq: 1,
			Cursor: []byte{1, byte(seq)}, Entries: []Entry{{Key: key(s, int(seq)), Value: []byte{byte(seq)}}}}
	}
	cases := []struct {
		name string
		run  func(t *testing.T, n *Node, st *memStore)
	}{
		{"waits for its predecessor", func(t *testing.T, n *Node, st *memStore) {
			errc := make(chan error, 1)
			go func() {
				_, _, err := n.ImportSnapshot(context.Background(), s, "m1", batch(2, true, true))
				errc <- err
			}()
			waitingForPrevious(t, n, s, errc)
			if _, _, err := n.ImportSnapshot(context.Background(), s, "m1", batch(1, false, false)); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("batch 2 after batch 1: %v", err)
			}
			if st := n.ImportStatus(s, "m1"); st.LastBatchSeq != 2 || !st.SnapshotDone || st.Cursor[1] != 2 {
				t.Fatalf("import state %+v, want batch 2 applied last, done", st)
			}
			for seq := 1; seq <= 2; seq++ {
				if v := st.data[s][string(key(s, seq))]; len(v) != 1 || v[0] != byte(seq) {
					t.Fatalf("key of batch %d holds %v", seq, v)
				}
			}
		}},
		{"a gap without the flag is refused", func(t *testing.T, n *Node, st *memStore) {
			if _, _, err := n.ImportSnapshot(context.Background(), s, "m1", batch(2, false, false)); !errors.Is(err, ErrImportOrder) {
				t.Fatalf("batch 2 first without AfterPrevious: %v, want ErrImportOrder", err)
			}
		}},
		{"two ahead is refused", func(t *testing.T, n *Node, st *memStore) {
			if _, _, err := n.ImportSnapshot(context.Background(), s, "m1", batch(3, true, false)); !errors.Is(err, ErrImportOrder) {
				t.Fatalf("batch 3 first: %v, want ErrImportOrder", err)
			}
		}},
		{"a cancelled wait applies nothing", func(t *testing.T, n *Node, st *memStore) {
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, _, err := n.ImportSnapshot(ctx, s, "m1", batch(2, true, false))
				errc <- err
			}()
			waitingForPrevious(t, n, s, errc)
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled batch 2: %v, want context.Canceled", err)
			}
			if st := n.ImportStatus(s, "m1"); st.LastBatchSeq != 0 {
				t.Fatalf("import state %+v after a cancelled wait, want nothing applied", st)
			}
			if _, ok := st.data[s][string(key(s, 2))]; ok {
				t.Fatal("the cancelled batch's key was applied")
			}
			// The move goes on, batch 1 then 2, one at a time.
			for seq := uint64(1); seq <= 2; seq++ {
				if _, _, err := n.ImportSnapshot(context.Background(), s, "m1", batch(seq, false, seq == 2)); err != nil {
					t.Fatalf("batch %d after the cancelled wait: %v", seq, err)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newMemStore()
			m := new(StaticMap)
			m.SetAll("b", "127.0.0.1:2") // b owns everything; a receives s
			n := newTestNode(t, st, m, t.TempDir())
			tc.run(t, n, st)
		})
	}
}

// TestImportIntoOwnedSlot: a node refuses an import into a slot its map
// gives to it, and says so as retryable (Unavailable): the mover begins a
// move only to a node the directory says does not own the slot, so the
// node's map is behind and the mover tries again once it caught up.
func TestImportIntoOwnedSlot(t *testing.T) {
	st := newMemStore()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1") // a owns everything
	n := newTestNode(t, st, m, t.TempDir())
	key := []byte("{owned}:1")
	s := slots.ForKey(key)
	_, _, err := n.ImportSnapshot(context.Background(), s, "m1", SnapshotBatch{BatchSeq: 1, Done: true,
		Entries: []Entry{{Key: key, Value: []byte("v")}}})
	if !errors.Is(err, ErrOwned) || !errors.Is(err, ErrMapBehind) {
		t.Fatalf("import into an owned slot: %v, want ErrOwned and ErrMapBehind", err)
	}
	if got := status.Code(StatusError(err)); got != codes.Unavailable {
		t.Errorf("status %v, want Unavailable", got)
	}
	if len(st.data[s]) != 0 {
		t.Errorf("the refused import wrote %d keys", len(st.data[s]))
	}
	m.SetAll("b", "127.0.0.1:2") // the map catches up
	if _, _, err := n.ImportSnapshot(context.Background(), s, "m1", SnapshotBatch{BatchSeq: 1, Done: true,
		Entries: []Entry{{Key: key, Value: []byte("v")}}}); err != nil {
		t.Fatalf("import once the map caught up: %v", err)
	}
}
