package directory

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/slotd/slotd/slots"
)

var randomSeed = flag.Uint64("random-seed", 20261130, "seed of TestRandomOperationsKeepInvariants")

// model is the table rebuilt from history alone, plus the node facts the
// test needs to predict which operations are valid.
type model struct {
	owners   []string
	moves    map[int]Move // slot -> move
	nodes    map[string]bool
	draining map[string]bool
}

// applyHistory replays one history entry onto the model.
func (m *model) applyHistory(t *testing.T, c Change) {
	t.Helper()
	switch c.Kind {
	case ChangeMoveBegin:
		m.moves[c.Slot.Int()] = Move{Slot: c.Slot, From: c.From, To: c.To, MoveID: c.MoveID, Phase: PhaseCopy}
	case ChangeMoveAdvance:
		mv := m.moves[c.Slot.Int()]
		mv.Phase = c.Phase
		m.moves[c.Slot.Int()] = mv
	case ChangeMoveCommit:
		m.owners[c.Slot.Int()] = c.To
		delete(m.moves, c.Slot.Int())
	case ChangeMoveAbort:
		delete(m.moves, c.Slot.Int())
	case ChangeNodeRegister:
		m.nodes[c.Node] = true
	case ChangeNodeRemove:
		delete(m.nodes, c.Node)
		delete(m.draining, c.Node)
	case ChangeNodeDrain:
		m.draining[c.Node] = true
	case ChangeNodeUndrain:
		delete(m.draining, c.Node)
	case ChangeNodeWeight, ChangeNodeAddr:
	default:
		t.Fatalf("unexpected history kind %q at version %d", c.Kind, c.Version)
	}
}

// TestRandomOperationsKeepInvariants runs 1,000 random operations, valid and
// invalid, and after each checks: every slot has exactly one registered
// owner, the version rose by exactly one per change and not at all on an
// error, each move's source owns its slot, and the table rebuilt from the
// history alone equals the table read from etcd.
func TestRandomOperationsKeepInvariants(t *testing.T) {
	// A fixed seed keeps the test deterministic; -random-seed explores.
	seed := *randomSeed
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 42))
	_, d, snap := setup(t, 4, nil)
	ctx := testCtx(t)

	m := &model{owners: snap.Owners(), moves: map[int]Move{}, nodes: map[string]bool{}, draining: map[string]bool{}}
	for _, n := range snap.Nodes {
		m.nodes[n.ID] = true
	}
	ids := []string{"n0", "n1", "n2", "n3", "n4", "n5", "ghost", ""}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	// A handful of hot slots make moves collide, plus any slot at random.
	hot := []int{0, 1, 2, 3, 100, 16383}
	pickSlot := func() slots.Slot {
		if rng.IntN(3) == 0 {
			return slots.MustNew(rng.IntN(slots.Count))
		}
		return slots.MustNew(hot[rng.IntN(len(hot))])
	}
	// Slots with a move in flight, for the ops that need one.
	pickMoving := func() slots.Slot {
		if len(m.moves) == 0 || rng.IntN(5) == 0 {
			return pickSlot()
		}
		ss := slices.Sorted(maps.Keys(m.moves))
		return slots.MustNew(ss[rng.IntN(len(ss))])
	}
	pickNode := func() string {
		if rng.IntN(5) == 0 {
			return pick(ids)
		}
		return pick(slices.Sorted(maps.Keys(m.nodes)))
	}
	phases := []Phase{PhaseCopy, PhaseCatchup, PhaseCatchup, PhaseFenced, PhaseFenced, PhaseFenced, "bogus"}
	moveIDOf := func(s slots.Slot) string {
		if mv, ok := m.moves[s.Int()]; ok && rng.IntN(10) > 0 {
			return mv.MoveID
		}
		return "m-unknown"
	}

	version := snap.Version
	okOps, errOps := 0, 0
	for i := range 1000 {
		var desc string
		var err error
		// wantOK is the model's prediction, where the model can tell.
		var wantOK *bool
		predict := func(ok bool) { wantOK = &ok }
		switch op := rng.IntN(10); op {
		case 0, 1, 2:
			s, from, to := pickSlot(), pick(ids), pickNode()
			if rng.IntN(5) > 0 {
				from = m.owners[s.Int()] // mostly right about the owner
			}
			desc = fmt.Sprintf("begin %d %s->%s", s.Int(), from, to)
			_, busy := m.moves[s.Int()]
			predict(!busy && from != to && m.owners[s.Int()] == from && m.nodes[to] && !m.draining[to])
			_, err = d.BeginMove(ctx, MoveSpec{Slot: s, From: from, To: to, MoveID: fmt.Sprintf("r%d", i), Reason: "random"})
		case 3, 4:
			s, ph := pickMoving(), phases[rng.IntN(len(phases))]
			id := moveIDOf(s)
			desc = fmt.Sprintf("advance %d %s %s", s.Int(), id, ph)
			mv, ok := m.moves[s.Int()]
			predict(ok && mv.MoveID == id && phaseOrder[ph] >= phaseOrder[mv.Phase] && phaseOrder[ph] > 0)
			_, err = d.AdvanceMove(ctx, s, id, ph)
		case 5, 6:
			s := pickMoving()
			id := moveIDOf(s)
			desc = fmt.Sprintf("commit %d %s", s.Int(), id)
			mv, ok := m.moves[s.Int()]
			predict(ok && mv.MoveID == id && mv.Phase == PhaseFenced)
			_, err = d.CommitMove(ctx, s, id, "random")
		case 7:
			s := pickMoving()
			id := moveIDOf(s)
			desc = fmt.Sprintf("abort %d %s", s.Int(), id)
			mv, ok := m.moves[s.Int()]
			predict(ok && mv.MoveID == id)
			_, err = d.AbortMove(ctx, s, id, "random", "t")
		case 8:
			id := pick(ids)
			switch rng.IntN(4) {
			case 0:
				w := rng.IntN(3) // 0 is invalid
				desc = fmt.Sprintf("register %s weight %d", id, w)
				_, err = d.RegisterNode(ctx, Node{ID: id, Addr: "127.0.0.1:7777", Zone: "z0", Weight: w})
			case 1:
				w := rng.IntN(3)
				desc = fmt.Sprintf("set weight %s %d", id, w)
				_, err = d.SetWeight(ctx, id, w, "t")
			case 2:
				desc = "drain " + id
				_, err = d.Drain(ctx, id, "random", "t")
			case 3:
				desc = "undrain " + id
				_, err = d.Undrain(ctx, id, "random", "t")
			}
		case 9:
			id := pick(ids)
			desc = "remove " + id
			_, err = d.RemoveNode(ctx, id, "random", "t")
		}

		if wantOK != nil && *wantOK != (err == nil) {
			t.Fatalf("op %d %s: err = %v, model predicted ok=%v", i, desc, err, *wantOK)
		}
		if err != nil {
			errOps++
			if !errorsIsAny(err, ErrInvalid, ErrNotFound, ErrPrecondition) {
				t.Fatalf("op %d %s: unexpected error %v", i, desc, err)
			}
		} else {
			okOps++
		}

		got, serr := d.Snapshot(ctx)
		if serr != nil {
			t.Fatal(serr)
		}
		if got.Version < version || (err != nil && got.Version != version) {
			t.Fatalf("op %d %s (err %v): version %d -> %d", i, desc, err, version, got.Version)
		}
		if delta := got.Version - version; delta > 0 {
			hist, herr := d.History(ctx, int(delta))
			if herr != nil {
				t.Fatal(herr)
			}
			if delta != 1 || len(hist) != 1 || hist[0].Version != got.Version {
				t.Fatalf("op %d %s: version %d -> %d with history %+v", i, desc, version, got.Version, hist)
			}
			m.applyHistory(t, hist[0])
		}
		version = got.Version

		// One registered owner per slot, equal to the history replay.
		if owners := got.Owners(); !slices.Equal(owners, m.owners) {
			t.Fatalf("op %d %s: table differs from the history replay", i, desc)
		}
		for s, o := range m.owners {
			if !m.nodes[o] {
				t.Fatalf("op %d %s: slot %d owned by unregistered %q", i, desc, s, o)
			}
		}
		if len(got.Moves) != len(m.moves) {
			t.Fatalf("op %d %s: %d moves in etcd, %d in the history replay", i, desc, len(got.Moves), len(m.moves))
		}
		for _, mv := range got.Moves {
			want := m.moves[mv.Slot.Int()]
			if mv.MoveID != want.MoveID || mv.Phase != want.Phase || mv.From != got.Owner(mv.Slot) {
				t.Fatalf("op %d %s: move %+v, history replay %+v", i, desc, mv, want)
			}
		}
		if gotIDs := slices.Sorted(maps.Keys(got.byID)); !slices.Equal(gotIDs, slices.Sorted(maps.Keys(m.nodes))) {
			t.Fatalf("op %d %s: nodes %v, history replay %v", i, desc, gotIDs, slices.Sorted(maps.Keys(m.nodes)))
		}
	}
	t.Logf("%d operations accepted, %d refused; final version %d", okOps, errOps, version)
	if changes := version - snap.Version; changes < 200 || errOps < 200 {
		t.Errorf("mix too skewed to mean much: %d changes, %d refused", changes, errOps)
	}
}

func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
