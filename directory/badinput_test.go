package directory

import (
	"errors"
	"slices"
	"testing"

	"github.com/slotd/slotd/slots"
)

func TestBadInputChangesNothing(t *testing.T) {
	_, d, snap := setup(t, 3, nil)
	ctx := testCtx(t)
	s0 := ownerSlot(t, snap, "n0")
	slot := slots.MustNew(s0)
	if _, err := d.Drain(ctx, "n2", "test", "t"); err != nil {
		t.Fatal(err)
	}
	mv, err := d.BeginMove(ctx, MoveSpec{Slot: slot, From: "n0", To: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	other := slots.MustNew(ownerSlot(t, snap, "n1"))
	long := string(make([]byte, 2000))

	cases := []struct {
		name string
		op   func() error
		want error
	}{
		{"begin: empty target", func() error {
			_, err := d.BeginMove(ctx, MoveSpec{Slot: other, From: "n1"})
			return err
		}, ErrInvalid},
		{"begin: same source and target", func() error {
			_, err := d.BeginMove(ctx, MoveSpec{Slot: other, From: "n1", To: "n1"})
			return err
		}, ErrInvalid},
		{"begin: bad move id", func() error {
			_, err := d.BeginMove(ctx, MoveSpec{Slot: other, From: "n1", To: "n0", MoveID: "a/b"})
			return err
		}, ErrInvalid},
		{"begin: reason too long", func() error {
			_, err := d.BeginMove(ctx, MoveSpec{Slot: other, From: "n1", To: "n0", Reason: long})
			return err
		}, ErrInvalid},
		{"begin: unknown target", func() error {
			_, err := d.BeginMove(ctx, MoveSpec{Slot: other, From: "n1", To: "ghost"})
			return err
		}, ErrNotFound},
		{"begin: owner mismatch", func() error {
			_, err := d.BeginMove(ctx, MoveSpec{Slot: other, From: "n0", To: "n1"})
			return err
		}, ErrPrecondition},
		{"begin: target draining", func() error {
			_, err := d.BeginMove(ctx, MoveSpec{Slot: other, From: "n1", To: "n2"})
			return err
		}, ErrPrecondition},
		{"begin: slot not stable", func() error {
			_, err := d.BeginMove(ctx, MoveSpec{Slot: slot, From: "n0", To: "n1"})
			return err
		}, ErrPrecondition},
		{"begin: stale expected version", func() error {
			_, err := d.BeginMove(ctx, MoveSpec{Slot: other, From: "n1", To: "n0", ExpectVersion: 1})
			return err
		}, ErrConflict},
		{"advance: unknown phase", func() error {
			_, err := d.AdvanceMove(ctx, slot, mv.MoveID, "teleport")
			return err
		}, ErrInvalid},
		{"advance: unknown move", func() error {
			_, err := d.AdvanceMove(ctx, slot, "m-nope", PhaseCatchup)
			return err
		}, ErrNotFound},
		{"commit: not fenced", func() error {
			_, err := d.CommitMove(ctx, slot, mv.MoveID, "t")
			return err
		}, ErrPrecondition},
		{"commit: move not in flight", func() error {
			_, err := d.CommitMove(ctx, other, mv.MoveID, "t")
			return err
		}, ErrNotFound},
		{"abort: move not in flight", func() error {
			_, err := d.AbortMove(ctx, other, "m-x", "r", "t")
			return err
		}, ErrNotFound},
		{"register: empty id", func() error {
			_, err := d.RegisterNode(ctx, Node{Addr: "127.0.0.1:1", Weight: 1})
			return err
		}, ErrInvalid},
		{"register: id with slash", func() error {
			_, err := d.RegisterNode(ctx, Node{ID: "a/b", Addr: "127.0.0.1:1", Weight: 1})
			return err
		}, ErrInvalid},
		{"register: weight 0", func() error {
			_, err := d.RegisterNode(ctx, Node{ID: "x", Addr: "127.0.0.1:1", Weight: 0})
			return err
		}, ErrInvalid},
		{"register: negative weight", func() error {
			_, err := d.RegisterNode(ctx, Node{ID: "x", Addr: "127.0.0.1:1", Weight: -3})
			return err
		}, ErrInvalid},
		{"register: address without port", func() error {
			_, err := d.RegisterNode(ctx, Node{ID: "x", Addr: "127.0.0.1", Weight: 1})
			return err
		}, ErrInvalid},
		{"register: same id, other weight", func() error {
			_, err := d.RegisterNode(ctx, Node{ID: "n0", Addr: "127.0.0.1:7000", Zone: "z0", Weight: 5})
			return err
		}, ErrPrecondition},
		{"set weight: zero", func() error {
			_, err := d.SetWeight(ctx, "n0", 0, "t")
			return err
		}, ErrInvalid},
		{"set weight: unknown node", func() error {
			_, err := d.SetWeight(ctx, "ghost", 2, "t")
			return err
		}, ErrNotFound},
		{"update address: bad", func() error {
			_, err := d.UpdateAddr(ctx, "n0", "nowhere", "t")
			return err
		}, ErrInvalid},
		{"drain: unknown node", func() error {
			_, err := d.Drain(ctx, "ghost", "r", "t")
			return err
		}, ErrNotFound},
		{"remove: owns slots", func() error {
			_, err := d.RemoveNode(ctx, "n2", "r", "t")
			return err
		}, ErrPrecondition},
		{"remove: unknown", func() error {
			_, err := d.RemoveNode(ctx, "ghost", "r", "t")
			return err
		}, ErrNotFound},
		{"bootstrap: again", func() error {
			_, err := d.Bootstrap(ctx, testNodes(3), 0, "t")
			return err
		}, ErrAlreadyBootstrapped},
		{"bootstrap: negative vnodes", func() error {
			_, err := d.Bootstrap(ctx, testNodes(3), -1, "t")
			return err
		}, ErrInvalid},
		{"heartbeat: unknown node", func() error {
			return d.Touch(ctx, "ghost")
		}, ErrNotFound},
		{"throttle: negative", func() error {
			return d.SetThrottle(ctx, -1)
		}, ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, err := d.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			err = tc.op()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			after, err := d.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after.Version != before.Version {
				t.Errorf("version moved from %d to %d", before.Version, after.Version)
			}
			if !slices.Equal(after.Owners(), before.Owners()) || !slices.Equal(after.Moves, before.Moves) {
				t.Error("table changed")
			}
		})
	}
}
