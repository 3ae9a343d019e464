package load

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/slots"
)

// fakeMap is a map at one version, and the slots changed since older ones.
type fakeMap struct {
	m       *slotmap.Map
	changed map[uint64][]int // version -> slots changed after it
}

func (f *fakeMap) Current() *slotmap.Map { return f.m }
func (f *fakeMap) ChangedSince(v uint64) (slots.Set, bool) {
	var set slots.Set
	ss, ok := f.changed[v]
	for _, s := range ss {
		set.Add(slots.MustNew(s))
	}
	return set, ok
}

// testMap: n1 owns slots 0-99 and 16000-16383, n2 owns 100-16383 less
// those, n3 (weight 2) owns nothing yet; at version 10, where slot 5 moved
// from n2 to n1 after version 9.
func testMap(t *testing.T) *fakeMap {
	t.Helper()
	owners := make([]string, slots.Count)
	for i := range owners {
		switch {
		case i < 100 || i >= 16000:
			owners[i] = "n1"
		default:
			owners[i] = "n2"
		}
	}
	active := slotdv1.NodeState_NODE_STATE_ACTIVE
	m, err := slotmap.New(slotmap.Snapshot{Version: 10, ClusterID: "c", Owners: owners, Nodes: []slotmap.Node{
		{ID: "n1", Addr: "a1", Weight: 1, State: active}, {ID: "n2", Addr: "a2", Weight: 1, State: active}, {ID: "n3", Addr: "a3", Weight: 2, State: active},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &fakeMap{m: m, changed: map[uint64][]int{10: nil, 9: {5}}}
}

func newAgg(t *testing.T, m Map) *Aggregator {
	t.Helper()
	a, err := New(Config{Map: m})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func goodReport() *slotdv1.LoadReport {
	return &slotdv1.LoadReport{
		NodeId: "n1", Version: 10, Interval: durationpb.New(10 * time.Second),
		Slots: []*slotdv1.SlotLoad{
			{Slot: 1, Keys: 10, Bytes: 1000, Reads_1M: 5, Writes_1M: 1, Reads_10M: 4, Writes_10M: 2},
			{Slot: 16001, Keys: 1, Bytes: 10},
		},
		HotKeys: []*slotdv1.HotKey{{Key: keyOf(1), Slot: 1, Rate: 3, Error: 0.5}},
	}
}

// keyOf returns a key in slot s.
func keyOf(s int) []byte {
	for i := 0; ; i++ {
		k := []byte("k" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+(i/26)%26)) + string(rune('a'+(i/676)%26)) + string(rune('a'+(i/17576)%26)))
		if slots.ForKey(k).Int() == s {
			return k
		}
	}
}

// TestReportRefusesBadInput: every bad report is refused with the right
// error and leaves the previous report in place.
func TestReportRefusesBadInput(t *testing.T) {
	edit := func(f func(r *slotdv1.LoadReport)) *slotdv1.LoadReport {
		r := goodReport()
		f(r)
		return r
	}
	tests := []struct {
		name string
		r    *slotdv1.LoadReport
		want error
		msg  string
	}{
		{"no node id", edit(func(r *slotdv1.LoadReport) { r.NodeId = "" }), ErrInvalid, "node_id is empty"},
		{"unregistered node", edit(func(r *slotdv1.LoadReport) { r.NodeId = "n9" }), ErrUnknownNode, "n9"},
		{"no version", edit(func(r *slotdv1.LoadReport) { r.Version = 0 }), ErrInvalid, "no map version"},
		{"version ahead of the replica", edit(func(r *slotdv1.LoadReport) { r.Version = 11 }), ErrBehind, "version 11"},
		{"version too old to check", edit(func(r *slotdv1.LoadReport) { r.Version = 3 }), ErrBehind, "too old"},
		{"negative reads", edit(func(r *slotdv1.LoadReport) { r.Slots[0].Reads_10M = -1 }), ErrInvalid, "reads_10m -1"},
		{"NaN writes", edit(func(r *slotdv1.LoadReport) { r.Slots[0].Writes_1M = math.NaN() }), ErrInvalid, "not a number"},
		{"negative measured age", edit(func(r *slotdv1.LoadReport) { r.Slots[0].MeasuredSeconds = -5 }), ErrInvalid, "measured_seconds -5"},
		{"infinite measured age", edit(func(r *slotdv1.LoadReport) { r.Slots[0].MeasuredSeconds = math.Inf(1) }), ErrInvalid, "infinite"},
		{"infinite reads", edit(func(r *slotdv1.LoadReport) { r.Slots[1].Reads_1M = math.Inf(1) }), ErrInvalid, "infinite"},
		{"slot out of range", edit(func(r *slotdv1.LoadReport) { r.Slots[1].Slot = 16384 }), ErrInvalid, "out of range"},
		{"slot twice", edit(func(r *slotdv1.LoadReport) { r.Slots[1].Slot = 1 }), ErrInvalid, "listed twice"},
		{"slot of another node", edit(func(r *slotdv1.LoadReport) { r.Slots[1].Slot = 200 }), ErrInvalid, "owned by n2 at version 10, not by n1"},
		{"slot of another node, older version", edit(func(r *slotdv1.LoadReport) { r.Version = 9; r.Slots[1].Slot = 200 }), ErrInvalid, "owned by n2"},
		{"interval too short", edit(func(r *slotdv1.LoadReport) { r.Interval = durationpb.New(time.Millisecond) }), ErrInvalid, "interval"},
		{"interval too long", edit(func(r *slotdv1.LoadReport) { r.Interval = durationpb.New(time.Hour) }), ErrInvalid, "interval"},
		{"too many hot keys", edit(func(r *slotdv1.LoadReport) {
			for range MaxHotKeys {
				r.HotKeys = append(r.HotKeys, proto.Clone(r.HotKeys[0]).(*slotdv1.HotKey))
			}
		}), ErrInvalid, "hot keys"},
		{"hot key negative rate", edit(func(r *slotdv1.LoadReport) { r.HotKeys[0].Rate = -3 }), ErrInvalid, "negative"},
		{"hot key NaN error", edit(func(r *slotdv1.LoadReport) { r.HotKeys[0].Error = math.NaN() }), ErrInvalid, "not a number"},
		{"hot key in the wrong slot", edit(func(r *slotdv1.LoadReport) { r.HotKeys[0].Slot = 2 }), ErrInvalid, "not 2"},
		{"hot key of another node's slot", edit(func(r *slotdv1.LoadReport) { r.HotKeys[0].Slot = 300; r.HotKeys[0].Truncated = true }), ErrInvalid, "owned by n2"},
		{"empty hot key", edit(func(r *slotdv1.LoadReport) { r.HotKeys[0].Key = nil }), ErrInvalid, "empty hot key"},
		{"too many slots", edit(func(r *slotdv1.LoadReport) {
			r.Slots = make([]*slotdv1.SlotLoad, slots.Count+1)
		}), ErrInvalid, "at most 16384"},
	}
	a := newAgg(t, testMap(t))
	if err := a.Report(t0, goodReport()); err != nil {
		t.Fatal(err)
	}
	before := a.NodeLoads(t0)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := a.Report(t0.Add(time.Second), tc.r)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Report: %v, want %v with %q", err, tc.want, tc.msg)
			}
			if after := a.NodeLoads(t0); !equalLoads(before, after) {
				t.Fatalf("a refused report changed the aggregate: %v -> %v", before, after)
			}
		})
	}
	// Before bootstrap every report waits.
	empty := &fakeMap{m: &slotmap.Map{}}
	if err := newAgg(t, empty).Report(t0, goodReport()); !errors.Is(err, ErrBehind) {
		t.Fatalf("before bootstrap: %v, want ErrBehind", err)
	}
}

func equalLoads(a, b any) bool {
	return strings.Compare(sprint(a), sprint(b)) == 0
}

func sprint(v any) string { return strings.TrimSpace(strings.ReplaceAll(fmtV(v), "\n", " ")) }

// TestReportOlderVersion: a report at an older version keeps the slots
// the node owned then and drops those that changed hands since (slot 5
// moved to n1 after version 9, so n1's report at 9 cannot speak for it, and
// n2's report at 9 may still list it).
func TestReportOlderVersion(t *testing.T) {
	a := newAgg(t, testMap(t))
	r := goodReport()
	r.Version = 9
	r.Slots = append(r.Slots, &slotdv1.SlotLoad{Slot: 5, Keys: 7})
	if err := a.Report(t0, r); err != nil {
		t.Fatal(err)
	}
	got := a.NodeLoads(t0)["n1"].Slots
	if len(got) != 2 || got[0].Slot != 1 || got[1].Slot != 16001 {
		t.Fatalf("n1 slots %+v, want 1 and 16001 (5 changed hands after 9)", got)
	}
	r2 := &slotdv1.LoadReport{NodeId: "n2", Version: 9, Slots: []*slotdv1.SlotLoad{{Slot: 5, Keys: 3}, {Slot: 500, Keys: 4}}}
	if err := a.Report(t0, r2); err != nil {
		t.Fatal(err)
	}
	if got := a.NodeLoads(t0)["n2"].Slots; len(got) != 1 || got[0].Slot != 500 {
		t.Fatalf("n2 slots %+v, want only 500", got)
	}
}

// TestExpiry: a report lives three of its intervals; then the node is
// unknown (missing from NodeLoads, Known false in View), never zero. A
// node owning no slot (n3) is known empty only while a node owning slots
// is known: with every report expired, nothing is.
func TestExpiry(t *testing.T) {
	a := newAgg(t, testMap(t))
	if err := a.Report(t0, goodReport()); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.NodeLoads(t0.Add(29 * time.Second))["n1"]; !ok {
		t.Fatal("n1 unknown 29 s after its report (interval 10 s)")
	}
	if _, ok := a.NodeLoads(t0.Add(30 * time.Second))["n1"]; ok {
		t.Fatal("n1 still known 30 s after its report")
	}
	v := a.View(t0.Add(30*time.Second), ViewOptions{})
	for _, n := range v.Nodes {
		if n.Known || n.Bytes != 0 {
			t.Fatalf("%s known after expiry: %+v", n.ID, n)
		}
		if _, ok := n.Ratio(DimBytes); ok {
			t.Fatalf("%s has a ratio while unknown", n.ID)
		}
	}
}

// TestNodeLoadsAndView: the planner's input carries the 10-minute rates;
// the view's fair shares use the weights of the active known nodes, and a
// slot alone above its node's band is a hot spot.
func TestNodeLoadsAndView(t *testing.T) {
	a := newAgg(t, testMap(t))
	if err := a.Report(t0, goodReport()); err != nil {
		t.Fatal(err)
	}
	r2 := &slotdv1.LoadReport{NodeId: "n2", Version: 10, Slots: []*slotdv1.SlotLoad{{Slot: 500, Keys: 30, Bytes: 3000, Reads_10M: 1, Tag: "cart7"}}}
	if err := a.Report(t0, r2); err != nil {
		t.Fatal(err)
	}
	nl := a.NodeLoads(t0)
	if len(nl) != 3 || len(nl["n3"].Slots) != 0 {
		t.Fatalf("NodeLoads %+v, want 3 nodes (n3 owns nothing: known empty)", nl)
	}
	s := nl["n1"].Slots[0]
	if s.Slot != 1 || s.Keys != 10 || s.Bytes != 1000 || s.Reads != 4 || s.Writes != 2 {
		t.Fatalf("n1 slot 1: %+v", s)
	}
	if hk := nl["n1"].HotKeys; len(hk) != 1 || hk[0].Key != string(keyOf(1)) || hk[0].Rate != 3 || hk[0].Err != 0.5 {
		t.Fatalf("n1 hot keys %+v", hk)
	}

	v := a.View(t0, ViewOptions{Slots: true})
	if len(v.Nodes) != 3 || !v.Nodes[2].Known || v.Nodes[2].Bytes != 0 {
		t.Fatalf("view nodes %+v, want n1 and n2 known, n3 known empty", v.Nodes)
	}
	n1, n2 := v.Nodes[0], v.Nodes[1]
	// Known active weight 4 (n3, weight 2, is known empty): n1 and n2
	// have a quarter of 4,010 bytes each.
	if n1.Bytes != 1010 || n1.FairBytes != 1002.5 || n2.FairBytes != 1002.5 || v.Nodes[2].FairBytes != 2005 {
		t.Fatalf("bytes %d, fair %v / %v / %v", n1.Bytes, n1.FairBytes, n2.FairBytes, v.Nodes[2].FairBytes)
	}
	if r, ok := n2.Ratio(DimBytes); !ok || math.Abs(r-3000.0/1002.5) > 1e-9 {
		t.Fatalf("n2 bytes ratio %v %v", r, ok)
	}
	if r, ok := n1.Ratio(DimOps); !ok || math.Abs(r-6.0/1.75) > 1e-9 {
		t.Fatalf("n1 ops ratio %v %v, want %v", r, ok, 6.0/1.75)
	}
	// n2's slot 500 holds 3000 bytes against a fair 1002.5: a hot spot.
	want := []HotSpot{
		{Slot: 1, Node: "n1", Dimension: DimOps, Share: 6 / 1.75},
		{Slot: 500, Node: "n2", Dimension: DimBytes, Share: 3000.0 / 1002.5, Tag: "cart7"},
	}
	if !slices.EqualFunc(v.HotSpots, want, func(a, b HotSpot) bool {
		return a.Slot == b.Slot && a.Node == b.Node && a.Dimension == b.Dimension && math.Abs(a.Share-b.Share) < 1e-9 && a.Tag == b.Tag
	}) {
		t.Fatalf("hot spots %+v, want %+v", v.HotSpots, want)
	}
	// The wire form reads back the same.
	back := ViewFromProto(v.Proto())
	if len(back.Nodes) != 3 || back.Nodes[1].FairBytes != n2.FairBytes || len(back.HotSpots) != 2 || len(back.Nodes[0].Slots) != 2 {
		t.Fatalf("round trip: %+v", back)
	}
	if only := a.View(t0, ViewOptions{Nodes: []string{"n2"}}); len(only.Nodes) != 1 || only.Nodes[0].ID != "n2" || only.Nodes[0].Slots != nil {
		t.Fatalf("view of n2 only: %+v", only.Nodes)
	}
}

func fmtV(v any) string { return fmt.Sprintf("%+v", v) }

func nowish() time.Time { return time.Now() }

// TestSlotMovedAfterReport: a slot that changes hands after its owner's
// report leaves that node's load (and view) at once; its new owner
// reports it.
func TestSlotMovedAfterReport(t *testing.T) {
	fm := testMap(t)
	a := newAgg(t, fm)
	if err := a.Report(t0, goodReport()); err != nil {
		t.Fatal(err)
	}
	moved, ok := fm.m.WithOwner(slots.MustNew(1), "n2", "a2", 11)
	if !ok {
		t.Fatal("WithOwner refused")
	}
	fm.m = moved
	if got := a.NodeLoads(t0)["n1"]; len(got.Slots) != 1 || got.Slots[0].Slot != 16001 || len(got.HotKeys) != 0 {
		t.Fatalf("n1 after slot 1 moved: %+v", got)
	}
	v := a.View(t0, ViewOptions{Slots: true})
	if n1 := v.Nodes[0]; n1.Bytes != 10 || len(n1.Slots) != 1 || len(n1.HotKeys) != 0 {
		t.Fatalf("n1 view after slot 1 moved: %+v", n1)
	}
}

// TestLoadFollowsTheSlot: a slot that moves after its new owner's last
// report counts at the new owner with its previous owner's last load at
// once (the old owner no longer counts it); the new owner's own report of
// it replaces that; when neither report lists it any more, it counts
// nowhere.
func TestLoadFollowsTheSlot(t *testing.T) {
	fm := testMap(t)
	a := newAgg(t, fm)
	if err := a.Report(t0, goodReport()); err != nil { // n1: slots 1 and 16001
		t.Fatal(err)
	}
	if err := a.Report(t0, &slotdv1.LoadReport{NodeId: "n2", Version: 10, Slots: []*slotdv1.SlotLoad{{Slot: 500, Keys: 30, Bytes: 3000, Reads_10M: 1}}}); err != nil {
		t.Fatal(err)
	}
	moved, ok := fm.m.WithOwner(slots.MustNew(1), "n2", "a2", 11)
	if !ok {
		t.Fatal("WithOwner refused")
	}
	fm.m = moved
	n2 := a.NodeLoads(t0)["n2"].Slots
	if len(n2) != 2 || n2[0].Slot != 1 || n2[0].Bytes != 1000 || n2[0].Reads != 4 || n2[0].Writes != 2 {
		t.Fatalf("n2 right after slot 1 moved to it: %+v, want slot 1 with n1's last load", n2)
	}
	v := a.View(t0, ViewOptions{})
	if v.Nodes[1].Bytes != 4000 || v.Nodes[1].Carried != 1 || v.Nodes[0].Bytes != 10 || v.Nodes[0].Carried != 0 {
		t.Fatalf("view right after the move: n1 %+v, n2 %+v", v.Nodes[0], v.Nodes[1])
	}
	// The old owner's next report no longer lists it: what it said last
	// still counts at the new owner (which has not listed it yet: a slot
	// it gained a moment ago is not measured there yet).
	if err := a.Report(t0.Add(500*time.Millisecond), &slotdv1.LoadReport{NodeId: "n1", Version: 10, Slots: []*slotdv1.SlotLoad{{Slot: 16001, Keys: 1, Bytes: 10}}}); err != nil {
		t.Fatal(err)
	}
	if v := a.View(t0.Add(500*time.Millisecond), ViewOptions{}); v.Nodes[1].Bytes != 4000 || v.Nodes[1].Carried != 1 || v.Nodes[0].Bytes != 10 {
		t.Fatalf("view after the old owner reported again: n1 %+v, n2 %+v", v.Nodes[0], v.Nodes[1])
	}
	// ... until it expires with the report it came in (30 s).
	if v := a.View(t0.Add(30*time.Second), ViewOptions{}); v.Nodes[1].Known {
		t.Fatalf("n2 known 30 s after its only report: %+v", v.Nodes[1])
	}
	// The new owner's report replaces what was carried.
	if err := a.Report(t0.Add(time.Second), &slotdv1.LoadReport{NodeId: "n2", Version: 10, Slots: []*slotdv1.SlotLoad{
		{Slot: 1, Keys: 10, Bytes: 1100, Reads_10M: 5}, {Slot: 500, Keys: 30, Bytes: 3000, Reads_10M: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	if v := a.View(t0.Add(time.Second), ViewOptions{}); v.Nodes[1].Bytes != 4100 || v.Nodes[1].Carried != 0 || v.Nodes[1].Reads10m != 6 {
		t.Fatalf("view after n2 reported slot 1: %+v", v.Nodes[1])
	}
	// The slot went quiet and empty at n2 and n1 reported again: nobody
	// lists it, it counts nowhere.
	if err := a.Report(t0.Add(2*time.Second), &slotdv1.LoadReport{NodeId: "n2", Version: 10, Slots: []*slotdv1.SlotLoad{{Slot: 500, Keys: 30, Bytes: 3000}}}); err != nil {
		t.Fatal(err)
	}
	if v := a.View(t0.Add(2*time.Second), ViewOptions{}); v.Nodes[1].Bytes != 3000 || v.Nodes[1].Carried != 0 {
		t.Fatalf("view after n2's report without slot 1: %+v", v.Nodes[1])
	}
}

// TestLoadContinuesAcrossMove: a slot's new owner reports its rates as
// means since it gained the slot; they continue the previous owner's
// averages as if the slot had not moved, for as long as those weigh in,
// across the new owner's reports and after the previous owner's expired.
func TestLoadContinuesAcrossMove(t *testing.T) {
	fm := testMap(t)
	a := newAgg(t, fm)
	if err := a.Report(t0, &slotdv1.LoadReport{NodeId: "n1", Version: 10, Slots: []*slotdv1.SlotLoad{{Slot: 1, Keys: 10, Bytes: 1000, Reads_1M: 100, Reads_10M: 100, Writes_10M: 20}}}); err != nil {
		t.Fatal(err)
	}
	moved, ok := fm.m.WithOwner(slots.MustNew(1), "n2", "a2", 11)
	if !ok {
		t.Fatal("WithOwner refused")
	}
	fm.m = moved
	report := func(at time.Duration, measured, rate float64) {
		t.Helper()
		if err := a.Report(t0.Add(at), &slotdv1.LoadReport{NodeId: "n2", Version: 10, Slots: []*slotdv1.SlotLoad{
			{Slot: 1, Keys: 10, Bytes: 1100, Reads_1M: rate, Reads_10M: rate, MeasuredSeconds: measured},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	slot1 := func(at time.Duration) planner.SlotLoad {
		t.Helper()
		for _, s := range a.NodeLoads(t0.Add(at))["n2"].Slots {
			if s.Slot == 1 {
				return s
			}
		}
		t.Fatalf("n2 has no slot 1 at %v", at)
		return planner.SlotLoad{}
	}
	// 60 s after the move, at 10 reads/s since: the ten-minute average
	// has moved a tenth of the way (e^-0.1), the one-minute one most of it.
	report(60*time.Second, 60, 10)
	want10 := 100*math.Exp(-0.1) + 10*(1-math.Exp(-0.1))
	if s := slot1(60 * time.Second); math.Abs(s.Reads-want10) > 1e-9 || math.Abs(s.Writes-20*math.Exp(-0.1)) > 1e-9 || s.Bytes != 1100 {
		t.Fatalf("slot 1 at n2 after 60 s: %+v, want reads %.3f (continued), writes %.3f, the new bytes", s, want10, 20*math.Exp(-0.1))
	}
	if v := a.View(t0.Add(60*time.Second), ViewOptions{Slots: true}); math.Abs(v.Nodes[1].Reads1m-(100*math.Exp(-1)+10*(1-math.Exp(-1)))) > 1e-9 {
		t.Fatalf("one-minute reads %v", v.Nodes[1].Reads1m)
	}
	// 40 minutes later n1's report is long gone; the prior still weighs
	// e^-4 in the ten-minute average.
	report(40*time.Minute, 2400, 10)
	if s := slot1(40 * time.Minute); math.Abs(s.Reads-(100*math.Exp(-4)+10*(1-math.Exp(-4)))) > 1e-9 {
		t.Fatalf("slot 1 at n2 after 40 min: reads %v", s.Reads)
	}
	// Past five windows the owner's own averages stand alone.
	report(51*time.Minute, 3060, 10)
	if s := slot1(51 * time.Minute); s.Reads != 10 {
		t.Fatalf("slot 1 at n2 after 51 min: reads %v, want its own 10", s.Reads)
	}
	// A report without a measured age (owned since its start) is taken as it is.
	if err := a.Report(t0.Add(52*time.Minute), &slotdv1.LoadReport{NodeId: "n2", Version: 10, Slots: []*slotdv1.SlotLoad{{Slot: 1, Reads_10M: 7}}}); err != nil {
		t.Fatal(err)
	}
	if s := slot1(52 * time.Minute); s.Reads != 7 {
		t.Fatalf("slot 1 without a measured age: reads %v, want 7", s.Reads)
	}
}
