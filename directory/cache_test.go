package directory

import (
	"errors"
	"testing"

	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

// TestStaleWriteCache shows that a Directory whose cached state is behind
// (another process wrote since) neither loses a write nor reports a
// precondition the fresh table does not have.
func TestStaleWriteCache(t *testing.T) {
	c, a, snap := setup(t, 3, nil)
	b := newDir(t, c, nil)
	ctx := testCtx(t)
	s := slots.MustNew(7)
	owner := snap.Owner(s)
	var other string
	for _, n := range snap.Nodes {
		if n.ID != owner {
			other = n.ID
			break
		}
	}
	// b writes once, so it caches the table as of that write.
	if _, err := b.SetWeight(ctx, "n0", 2, "b"); err != nil {
		t.Fatal(err)
	}
	// a moves slot 7 behind b's back.
	mv, err := a.BeginMove(ctx, MoveSpec{Slot: s, From: owner, To: other, By: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AdvanceMove(ctx, s, mv.MoveID, PhaseFenced); err != nil {
		t.Fatal(err)
	}
	v, err := a.CommitMove(ctx, s, mv.MoveID, "a")
	if err != nil {
		t.Fatal(err)
	}
	// On b's stale cache, owner still owns the slot; on the table it does
	// not: the move from the old owner must be refused...
	if _, err := b.BeginMove(ctx, MoveSpec{Slot: s, From: owner, To: other, By: "b"}); !errors.Is(err, ErrPrecondition) && !errors.Is(err, ErrInvalid) {
		t.Fatalf("stale move accepted or wrong error: %v", err)
	}
	// ...and the move from the new owner, refused by the stale cache,
	// accepted.
	if _, err := b.BeginMove(ctx, MoveSpec{Slot: s, From: other, To: owner, By: "b"}); err != nil {
		t.Fatalf("valid move refused on a stale cache: %v", err)
	}
	after, err := a.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != v+1 {
		t.Fatalf("version %d, want %d", after.Version, v+1)
	}
	if n, _ := after.Node("n0"); n.Weight != 2 {
		t.Fatalf("b's earlier write lost: weight %d", n.Weight)
	}
}

// TestBootstrapManyNodes bootstraps more nodes than one etcd transaction
// can register beside the owner chunks.
func TestBootstrapManyNodes(t *testing.T) {
	c := etcdtest.New(t)
	d := newDir(t, c, nil)
	snap, err := d.Bootstrap(testCtx(t), testNodes(200), 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	counts := snap.Counts()
	if len(counts) != 200 {
		t.Fatalf("%d nodes in the table", len(counts))
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	if total != slots.Count {
		t.Fatalf("%d slots owned", total)
	}
	if _, err := d.Bootstrap(testCtx(t), testNodes(200), 0, "test"); !errors.Is(err, ErrAlreadyBootstrapped) {
		t.Fatalf("second bootstrap: %v", err)
	}
}
