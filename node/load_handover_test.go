package node

import (
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/slotd/slotd/slots"
)

// TestLoadGainedSlotReadsItsRate: a slot the node gains after running a
// long time reads its real rate from its first report on (the mean since
// the gain), not the fraction an average over the node's whole life would
// give, and is left out of Load until it is measured.
func TestLoadGainedSlotReadsItsRate(t *testing.T) {
	k := []byte("{gained}")
	n, m, clock, s := gainingNode(t, string(k))
	ctx := context.Background()
	fold := func(d time.Duration) {
		clock.now = clock.now.Add(d)
		n.foldLoad(clock.now)
	}
	fold(0)
	for range 240 { // 20 minutes of folds: the node is old
		fold(5 * time.Second)
	}
	if err := n.CheckRead([]byte("other")); err != nil { // the node looks at its map
		t.Fatal(err)
	}
	m.Set("a", "127.0.0.1:1", s) // the slot moves here
	clock.now = clock.now.Add(time.Second)
	if err := n.CheckRead(k); err != nil {
		t.Fatal(err)
	}
	listed := func() (SlotLoad, bool) {
		l, err := n.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sl := range l.Slots {
			if sl.Slot == s {
				return sl, true
			}
		}
		return SlotLoad{}, false
	}
	if _, ok := listed(); ok {
		t.Fatal("a slot gained a moment ago is listed before it is measured")
	}
	for range 6 { // 30 s at 10 reads/s
		for range 49 {
			if err := n.CheckRead(k); err != nil {
				t.Fatal(err)
			}
		}
		fold(5 * time.Second)
		if err := n.CheckRead(k); err != nil {
			t.Fatal(err)
		}
	}
	sl, ok := listed()
	if !ok {
		t.Fatal("the gained slot is not listed after 30 s")
	}
	if sl.Reads10m < 9 || sl.Reads10m > 11 || sl.Reads1m < 9 || sl.Reads1m > 11 {
		t.Fatalf("gained slot after 30 s at ~10/s: reads %.2f (1m) %.2f (10m), want about 10", sl.Reads1m, sl.Reads10m)
	}
}

// TestLoadGainedSlotContinuesSourceRates: a slot that arrives with its
// source's rates (handed over at the fence) goes on from them as if it had
// not moved: here an hour of the source's history, so an exponential
// average from the source's values, listed at once (no measured age), not a
// mean since the gain.
func TestLoadGainedSlotContinuesSourceRates(t *testing.T) {
	k := []byte("{seeded}")
	n, m, clock, s := gainingNode(t, string(k))
	ctx := context.Background()
	n.foldLoad(clock.now)
	if err := n.CheckRead([]byte("other")); err != nil {
		t.Fatal(err)
	}
	// The move: a snapshot of the slot, then its source's rates at the fence.
	if _, _, err := n.ImportSnapshot(ctx, s, "m1", SnapshotBatch{BatchSeq: 1, Done: true, Entries: []Entry{{Key: k, Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	n.seedRates(s, "m1", SlotRates{Reads1m: 100, Reads10m: 100, Writes10m: 20, Measured: 3600})
	m.Set("a", "127.0.0.1:1", s) // committed
	if err := n.CheckRead(k); err != nil {
		t.Fatal(err)
	}
	l, err := n.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got *SlotLoad
	for i := range l.Slots {
		if l.Slots[i].Slot == s {
			got = &l.Slots[i]
		}
	}
	if got == nil || got.Reads10m != 100 || got.Writes10m != 20 || got.MeasuredSeconds != 0 || got.Keys != 1 {
		t.Fatalf("the slot right after it arrived with its source's rates: %+v, want them, listed at once", got)
	}
	for range 6 { // 30 s at 10 reads/s
		for range 50 {
			if err := n.CheckRead(k); err != nil {
				t.Fatal(err)
			}
		}
		clock.now = clock.now.Add(5 * time.Second)
		n.foldLoad(clock.now)
	}
	want := 100*math.Exp(-30.0/600) + 10*(1-math.Exp(-30.0/600))
	i := s.Int()
	if r10 := float64(n.load.r10[i]); math.Abs(r10-want) > 0.01 {
		t.Fatalf("reads (10m) 30 s after the move at 10/s: %.3f, want the source's average gone on: %.3f", r10, want)
	}
}

// TestLoadSeededYoungHistory: a slot whose source had measured it only 30 s
// (a young source: plain means) goes on as the source would have: a plain
// mean over the 30 s before and the 30 s after the move.
func TestLoadSeededYoungHistory(t *testing.T) {
	k := []byte("{young}")
	n, m, clock, s := gainingNode(t, string(k))
	n.foldLoad(clock.now)
	if err := n.CheckRead([]byte("other")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.ImportSnapshot(context.Background(), s, "m1", SnapshotBatch{BatchSeq: 1, Done: true}); err != nil {
		t.Fatal(err)
	}
	n.seedRates(s, "m1", SlotRates{Reads10m: 100, Measured: 30})
	m.Set("a", "127.0.0.1:1", s)
	if err := n.CheckRead(k); err != nil {
		t.Fatal(err)
	}
	for range 6 { // 30 s at 10 reads/s
		for range 50 {
			if err := n.CheckRead(k); err != nil {
				t.Fatal(err)
			}
		}
		clock.now = clock.now.Add(5 * time.Second)
		n.foldLoad(clock.now)
	}
	if r10 := float64(n.load.r10[s.Int()]); math.Abs(r10-55) > 0.5 {
		t.Fatalf("reads (10m): %.2f, want the mean over 60 s: (30 x 100 + 30 x 10) / 60 = 55", r10)
	}
}

// TestSlotRatesFoldsPending: the rates a fence hands over include the
// requests counted since the last fold, as a fold at that moment would.
func TestSlotRatesFoldsPending(t *testing.T) {
	clock := &simClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	n, err := New(Config{ID: "a", Store: newMemStore(), Map: m, StateDir: t.TempDir(), Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	k := []byte("k")
	n.foldLoad(clock.now)
	for range 20 {
		if err := n.CheckRead(k); err != nil {
			t.Fatal(err)
		}
	}
	clock.now = clock.now.Add(2 * time.Second)
	r := n.slotRates(slots.ForKey(k), clock.now)
	if r.Reads10m != 10 || r.Reads1m != 10 || r.Measured != 2 {
		t.Fatalf("rates 2 s after the start with 20 reads, none folded: %+v, want 10/s over 2 s", r)
	}
}

// gainingNode is node "a" on a simulated clock, owning every slot but
// key's, which "b" owns until the test moves it here (m.Set).
func gainingNode(t *testing.T, key string) (*Node, *StaticMap, *simClock, slots.Slot) {
	t.Helper()
	clock := &simClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	s := slots.ForString(key)
	m.Set("b", "127.0.0.1:2", s)
	n, err := New(Config{ID: "a", Store: newMemStore(), Map: m, StateDir: t.TempDir(), Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, m, clock, s
}
