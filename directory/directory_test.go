package directory

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/ringcompat"
	"github.com/slotd/slotd/slots"
)

func TestBootstrap(t *testing.T) {
	_, d, snap := setup(t, 3, nil)
	ctx := testCtx(t)
	if snap.Version != 1 {
		t.Errorf("version after bootstrap = %d, want 1", snap.Version)
	}
	want, err := ringcompat.InitialAssignment([]ringcompat.Node{{ID: "n0", Weight: 1, Zone: "z0"}, {ID: "n1", Weight: 1, Zone: "z1"}, {ID: "n2", Weight: 1, Zone: "z0"}}, ringcompat.DefaultVNodes)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Owners(); !slices.Equal(got, want) {
		t.Fatalf("owners differ from ringcompat.InitialAssignment")
	}
	checkOwnerPositions(t, snap)
	total := 0
	for id, n := range snap.Counts() {
		if n == 0 {
			t.Errorf("node %s owns no slot", id)
		}
		total += n
	}
	if total != slots.Count {
		t.Errorf("counts sum to %d, want %d", total, slots.Count)
	}

	// Same nodes, other order, other etcd: same table.
	c2 := etcdtest.New(t)
	d2 := newDir(t, c2, nil)
	nodes := testNodes(3)
	slices.Reverse(nodes)
	snap2, err := d2.Bootstrap(ctx, nodes, 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(snap.Owners(), snap2.Owners()) {
		t.Error("bootstrap with the same nodes in another order gave another table")
	}

	_, err = d.Bootstrap(ctx, testNodes(3), 0, "test")
	if !errors.Is(err, ErrAlreadyBootstrapped) {
		t.Fatalf("second bootstrap: err = %v, want ErrAlreadyBootstrapped", err)
	}
	if v := mustVersion(t, d); v != 1 {
		t.Errorf("version after refused bootstrap = %d, want 1", v)
	}
}

func TestBootstrapRegisteredNodes(t *testing.T) {
	c := etcdtest.New(t)
	d := newDir(t, c, nil)
	ctx := testCtx(t)
	if _, err := d.Snapshot(ctx); !errors.Is(err, ErrNotBootstrapped) {
		t.Fatalf("snapshot before bootstrap: err = %v, want ErrNotBootstrapped", err)
	}
	for _, n := range testNodes(2) {
		if _, err := d.RegisterNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.BeginMove(ctx, MoveSpec{Slot: slots.MustNew(1), From: "n0", To: "n1"}); !errors.Is(err, ErrNotBootstrapped) {
		t.Fatalf("move before bootstrap: err = %v, want ErrNotBootstrapped", err)
	}
	snap, err := d.Bootstrap(ctx, nil, 16, "test")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 3 || len(snap.Nodes) != 2 {
		t.Fatalf("bootstrap over registered nodes: version %d nodes %d, want 3 and 2", snap.Version, len(snap.Nodes))
	}
}

func TestNoSchema(t *testing.T) {
	c := etcdtest.New(t)
	d, err := New(Config{Client: c.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.RegisterNode(testCtx(t), testNodes(1)[0])
	if !errors.Is(err, ErrNoSchema) {
		t.Fatalf("register without schema: err = %v, want ErrNoSchema", err)
	}
}

func TestSchemaTooNewStopsWrites(t *testing.T) {
	_, d, _ := setup(t, 2, nil)
	ctx := testCtx(t)
	if err := d.SetSchema(ctx, SchemaVersion, SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	_, err := d.RegisterNode(ctx, Node{ID: "late", Addr: "127.0.0.1:1", Weight: 1})
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("write under a newer schema: err = %v, want ErrSchemaTooNew", err)
	}
	if _, err := d.Snapshot(ctx); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("read under a newer schema: err = %v, want ErrSchemaTooNew", err)
	}
}

func TestMoveLifecycle(t *testing.T) {
	_, d, snap := setup(t, 3, nil)
	ctx := testCtx(t)
	a := slots.MustNew(ownerSlot(t, snap, "n0"))
	b := slots.MustNew(ownerSlot(t, snap, "n1"))

	// A move of a plan begins only while the plan runs.
	if _, err := d.BeginMove(ctx, MoveSpec{Slot: a, From: "n0", To: "n2", PlanID: "p1", Reason: "fill n2", By: "op"}); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("begin a move of a plan that is not running: %v, want ErrPrecondition", err)
	}
	if err := d.CreatePlanRun(ctx, "p1", []byte("plan"), RunStart); err != nil {
		t.Fatal(err)
	}
	mv, err := d.BeginMove(ctx, MoveSpec{Slot: a, From: "n0", To: "n2", PlanID: "p1", Reason: "fill n2", By: "op"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range []Phase{PhaseCatchup, PhaseCatchup, PhaseFenced} {
		if _, err := d.AdvanceMove(ctx, a, mv.MoveID, ph); err != nil {
			t.Fatalf("advance to %s: %v", ph, err)
		}
	}
	if _, err := d.AdvanceMove(ctx, a, mv.MoveID, PhaseCopy); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("advance backwards: err = %v, want ErrPrecondition", err)
	}
	// The source may not be removed while in a move.
	if _, err := d.RemoveNode(ctx, "n2", "r", "t"); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("remove target in a move: err = %v, want ErrPrecondition", err)
	}
	vc, err := d.CommitMove(ctx, a, mv.MoveID, "mover")
	if err != nil {
		t.Fatal(err)
	}

	mv2, err := d.BeginMove(ctx, MoveSpec{Slot: b, From: "n1", To: "n0", Reason: "try"})
	if err != nil {
		t.Fatal(err)
	}
	va, err := d.AbortMove(ctx, b, mv2.MoveID, "target slow", "op")
	if err != nil {
		t.Fatal(err)
	}
	if va != vc+2 { // begin, abort
		t.Errorf("abort version %d, want %d", va, vc+2)
	}

	got, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner(a) != "n2" || got.Owner(b) != "n1" || len(got.Moves) != 0 {
		t.Fatalf("after commit+abort: owner(a)=%s owner(b)=%s moves=%d", got.Owner(a), got.Owner(b), len(got.Moves))
	}
	checkOwnerPositions(t, got)
	hist, err := d.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range hist {
		kinds = append(kinds, c.Kind)
	}
	wantKinds := []string{ChangeBootstrap, ChangeMoveBegin, ChangeMoveAdvance, ChangeMoveAdvance, ChangeMoveCommit, ChangeMoveBegin, ChangeMoveAbort}
	if !slices.Equal(kinds, wantKinds) {
		t.Fatalf("history kinds = %v, want %v", kinds, wantKinds)
	}
	commit := hist[4]
	if commit.Slot != a || commit.From != "n0" || commit.To != "n2" || commit.PlanID != "p1" || commit.MoveID != mv.MoveID || commit.By != "mover" || commit.Reason != "fill n2" {
		t.Errorf("commit entry = %+v", commit)
	}
	if abort := hist[6]; abort.Reason != "target slow" || abort.Slot != b {
		t.Errorf("abort entry = %+v", abort)
	}
}

func TestNodeOps(t *testing.T) {
	_, d, _ := setup(t, 2, nil)
	ctx := testCtx(t)
	n := Node{ID: "new", Addr: "127.0.0.1:9000", Zone: "z9", Weight: 2}
	got, err := d.RegisterNode(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != NodeActive {
		t.Errorf("new node state %s", got.State)
	}
	v := mustVersion(t, d)
	if _, err := d.RegisterNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if mustVersion(t, d) != v {
		t.Error("re-registering the same node bumped the version")
	}
	n.Addr = "127.0.0.1:9001"
	if got, err := d.RegisterNode(ctx, n); err != nil || got.Addr != n.Addr {
		t.Fatalf("re-register with new address: %v %+v", err, got)
	}
	if _, err := d.SetWeight(ctx, "new", 3, "op"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Drain(ctx, "new", "retire", "op"); err != nil {
		t.Fatal(err)
	}
	snap, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if nn, _ := snap.Node("new"); nn.Weight != 3 || nn.State != NodeDraining || nn.Addr != "127.0.0.1:9001" {
		t.Fatalf("node after edits = %+v", nn)
	}
	if _, err := d.RemoveNode(ctx, "new", "retired", "op"); err != nil {
		t.Fatal(err)
	}
	if err := d.Touch(ctx, "new"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("heartbeat of removed node: %v", err)
	}
}

func TestBeginMoveRace(t *testing.T) {
	for _, expect := range []bool{true, false} {
		t.Run(fmt.Sprintf("expect-version=%v", expect), func(t *testing.T) {
			_, d, snap := setup(t, 4, nil)
			ctx := testCtx(t)
			s := slots.MustNew(ownerSlot(t, snap, "n0"))
			const racers = 8
			var ev uint64
			if expect {
				ev = snap.Version
			}
			errs := make([]error, racers)
			var start, done sync.WaitGroup
			start.Add(1)
			for i := range racers {
				done.Add(1)
				go func() {
					defer done.Done()
					start.Wait()
					_, errs[i] = d.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: fmt.Sprintf("n%d", 1+i%3), ExpectVersion: ev, MoveID: fmt.Sprintf("race-%d", i)})
				}()
			}
			start.Done()
			done.Wait()
			wins := 0
			for i, err := range errs {
				switch {
				case err == nil:
					wins++
				case errors.Is(err, ErrConflict), errors.Is(err, ErrPrecondition):
				default:
					t.Errorf("racer %d: unexpected error %v", i, err)
				}
			}
			if wins != 1 {
				t.Fatalf("%d racers won, want exactly 1 (errors %v)", wins, errs)
			}
			if v := mustVersion(t, d); v != snap.Version+1 {
				t.Fatalf("version %d after the race, want %d", v, snap.Version+1)
			}
		})
	}
}

func TestConcurrentMovesOfDistinctSlotsAllApply(t *testing.T) {
	// Writers on different slots share the version key: within one
	// Directory they are group-committed, and every change applies with
	// its own version.
	_, d, snap := setup(t, 3, nil)
	ctx := testCtx(t)
	owned := snap.SlotsOf("n0")
	var ss []slots.Slot
	for s := range owned.All() {
		if len(ss) == 6 {
			break
		}
		ss = append(ss, s)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ss))
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = d.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: "n1"})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("move of slot %d: %v", ss[i].Int(), err)
		}
	}
	if v := mustVersion(t, d); v != snap.Version+uint64(len(ss)) {
		t.Errorf("version %d, want %d", v, snap.Version+uint64(len(ss)))
	}
}

func TestHistoryBounded(t *testing.T) {
	_, d, _ := setup(t, 2, func(c *Config) { c.HistoryLimit = 5 })
	ctx := testCtx(t)
	for i := range 12 {
		if _, err := d.SetWeight(ctx, "n0", 2+i, "t"); err != nil {
			t.Fatal(err)
		}
	}
	hist, err := d.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := mustVersion(t, d)
	if len(hist) != 5 || hist[0].Version != v-4 || hist[4].Version != v {
		t.Fatalf("history = %d entries from %d to %d, want 5 from %d to %d", len(hist), hist[0].Version, hist[len(hist)-1].Version, v-4, v)
	}
	last2, err := d.History(ctx, 2)
	if err != nil || len(last2) != 2 || last2[0].Version != v-1 || last2[1].Version != v {
		t.Fatalf("History(2) = %v, %v", last2, err)
	}
	since, err := d.HistorySince(ctx, v-3, 2)
	if err != nil || len(since) != 2 || since[0].Version != v-2 || since[1].Version != v-1 {
		t.Fatalf("HistorySince(v-3, 2) = %v, %v", since, err)
	}
	if all, err := d.HistorySince(ctx, 0, 0); err != nil || len(all) != 5 || all[0].Version != v-4 {
		t.Fatalf("HistorySince(0) = %v, %v; want the 5 kept entries", all, err)
	}
}

func TestStateSurvivesEtcdRestart(t *testing.T) {
	c, d, snap := setup(t, 3, nil)
	ctx := testCtx(t)
	s := slots.MustNew(ownerSlot(t, snap, "n0"))
	mv, err := d.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	before, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Restart(t)
	after, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version || !slices.Equal(after.Owners(), before.Owners()) ||
		!slices.Equal(after.Moves, before.Moves) || !slices.Equal(after.Nodes, before.Nodes) {
		t.Fatal("table changed across an etcd restart")
	}
	// The move in flight can be finished after the restart.
	if _, err := d.AdvanceMove(ctx, s, mv.MoveID, PhaseFenced); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CommitMove(ctx, s, mv.MoveID, "t"); err != nil {
		t.Fatal(err)
	}
}

// TestCommitFencedMove: a mover that fenced the source itself commits a
// move straight from its copy or catch-up phase, one transaction after the
// begin; history records the commit as fenced. CommitMove still refuses a
// move nobody said was fenced.
func TestCommitFencedMove(t *testing.T) {
	for _, from := range []Phase{PhaseCopy, PhaseCatchup, PhaseFenced} {
		t.Run(string(from), func(t *testing.T) {
			_, d, snap := setup(t, 3, nil)
			ctx := testCtx(t)
			s := slots.MustNew(ownerSlot(t, snap, "n0"))
			mv, err := d.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: "n1", By: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if from != PhaseCopy {
				if _, err := d.AdvanceMove(ctx, s, mv.MoveID, from); err != nil {
					t.Fatal(err)
				}
			}
			if from != PhaseFenced {
				if _, err := d.CommitMove(ctx, s, mv.MoveID, "test"); !errors.Is(err, ErrPrecondition) {
					t.Fatalf("CommitMove in phase %s: %v, want ErrPrecondition", from, err)
				}
			}
			v, err := d.CommitFencedMove(ctx, s, mv.MoveID, "test", Copied{Bytes: 3, Keys: 1})
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != v || got.Owner(s) != "n1" || len(got.Moves) != 0 {
				t.Fatalf("after commit at %d: version %d, owner %s, moves %v", v, got.Version, got.Owner(s), got.Moves)
			}
			hist, err := d.History(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if c := hist[0]; c.Kind != ChangeMoveCommit || c.Phase != PhaseFenced || c.MoveID != mv.MoveID {
				t.Fatalf("history %+v, want the commit of %s recorded fenced", c, mv.MoveID)
			}
			if _, err := d.CommitFencedMove(ctx, s, mv.MoveID, "test", Copied{}); !errors.Is(err, ErrNotFound) {
				t.Fatalf("second commit: %v, want ErrNotFound", err)
			}
		})
	}
}

// checkOwnerPositions fails unless OwnerPositions names, slot by slot, the
// node Owners names.
func checkOwnerPositions(t *testing.T, snap *Snapshot) {
	t.Helper()
	owners, pos := snap.Owners(), snap.OwnerPositions()
	if len(pos) != slots.Count {
		t.Fatalf("OwnerPositions has %d entries, want %d", len(pos), slots.Count)
	}
	for sl, p := range pos {
		got := ""
		if p != NoPosition {
			got = snap.Nodes[p].ID
		}
		if got != owners[sl] {
			t.Fatalf("slot %d: OwnerPositions names %q, Owners %q", sl, got, owners[sl])
		}
	}
}
