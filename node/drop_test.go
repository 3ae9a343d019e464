package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

// TestDropResumesAfterRestart: a drop asked for before a restart finishes
// after it, throttled by the rate it was given, and lifts the slot's fence.
func TestDropResumesAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := newMemStore()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	keep, gone := slots.ForString("{keep}"), slots.ForString("{gone}")
	for i := range 50 {
		for _, tag := range []string{"keep", "gone"} {
			k := fmt.Sprintf("{%s}:%d", tag, i)
			if err := st.Apply(ctx, slots.ForString(k), []Mutation{{Key: []byte(k), Value: []byte("v")}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	n := newTestNode(t, st, m, dir)
	if _, err := n.Fence(ctx, gone, "mv", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Drop(ctx, gone, 0, 0, ""); !errors.Is(err, ErrOwned) {
		t.Fatalf("drop of an owned slot: %v, want ErrOwned", err)
	}
	m.Set("b", "127.0.0.1:2", gone)
	if _, err := n.Drop(ctx, gone, m.Version()+1, 0, ""); !errors.Is(err, ErrMapBehind) {
		t.Fatalf("drop ahead of the map: %v, want ErrMapBehind", err)
	}
	if started, err := n.Drop(ctx, gone, m.Version(), 1000, ""); err != nil || !started {
		t.Fatalf("drop: %v %v", started, err)
	}
	if started, err := n.Drop(ctx, gone, m.Version(), 1000, ""); err != nil || started {
		t.Fatalf("second drop: started %v, err %v; want a no-op", started, err)
	}
	n.Close() // before Run ever deleted anything

	n2 := newTestNode(t, st, m, dir)
	if !n2.Dropping(gone) || !n2.Fenced(gone) {
		t.Fatal("the drop or the fence was lost in the restart")
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n2.Run(rctx) }()
	defer func() { cancel(); <-done }()
	waitfor.True(t, 20*time.Second, "the drop to finish", func() bool { return !n2.Dropping(gone) })
	if k, _, _ := st.SlotSize(ctx, gone); k != 0 {
		t.Fatalf("%d keys left in the dropped slot", k)
	}
	if k, _, _ := st.SlotSize(ctx, keep); k != 50 {
		t.Fatalf("the other slot has %d keys, want 50", k)
	}
	if n2.Fenced(gone) {
		t.Fatal("fence not lifted after the drop")
	}
}

// TestDropAfterReceivingAndGivingBack: a node that received a slot (an
// import) and later gives it away (an export) must drop its copy when asked
// by that later move. The finished import's state used to make the drop
// look like the late drop of an older move, so it was refused and the copy
// stayed on disk for good.
func TestDropAfterReceivingAndGivingBack(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	m := new(StaticMap)
	s := slots.ForString("{back}")
	m.SetAll("b", "127.0.0.1:2") // b owns everything; a receives s
	n := newTestNode(t, st, m, t.TempDir())
	key := []byte("{back}:1")
	if _, _, err := n.ImportSnapshot(ctx, s, "move-in", SnapshotBatch{BatchSeq: 1, Entries: []Entry{{Key: key, Value: []byte("v")}}, SnapshotSeq: 1, Done: true}); err != nil {
		t.Fatal(err)
	}
	m.Set("a", "127.0.0.1:1", s) // move-in committed
	if _, err := n.StartCapture(ctx, s, "move-out"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Fence(ctx, s, "move-out", m.Version()); err != nil {
		t.Fatal(err)
	}
	m.Set("b", "127.0.0.1:2", s) // move-out committed
	if started, err := n.Drop(ctx, s, m.Version(), 1000, "move-out"); err != nil || !started {
		t.Fatalf("drop asked by the move that took the slot away: started %v, err %v; want it started", started, err)
	}
}
