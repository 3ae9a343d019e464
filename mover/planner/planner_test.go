package planner

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotd/slotd/slots"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt scenarios")

// evenOwners spreads the slots over ids in contiguous ranges, the way a fresh
// cluster of equal nodes might hold them.
func evenOwners(ids ...string) []string {
	owners := make([]string, slots.Count)
	for s := range owners {
		owners[s] = ids[s*len(ids)/slots.Count]
	}
	return owners
}

func active(ids ...string) []Node {
	var ns []Node
	for _, id := range ids {
		ns = append(ns, Node{ID: id, Weight: 1, State: StateActive})
	}
	return ns
}

// minimumMoves is the lower bound the planner must meet: sum of excess.
func minimumMoves(p *Plan) int {
	n := 0
	for _, c := range p.Nodes {
		n += max(0, c.SlotsBefore-c.SlotsAfter)
	}
	return n
}

// checkPlan asserts the invariants every plan must hold.
func checkPlan(t *testing.T, in Input, p *Plan) {
	t.Helper()
	owners := slices.Clone(in.Owners)
	moved := map[int]bool{}
	for i, m := range p.Moves {
		if moved[m.Slot] {
			t.Fatalf("move %d: slot %d moved twice", i, m.Slot)
		}
		moved[m.Slot] = true
		if owners[m.Slot] != m.From {
			t.Fatalf("move %d: slot %d owned by %s, plan says %s", i, m.Slot, owners[m.Slot], m.From)
		}
		if in.Busy != nil && in.Busy.Contains(slots.MustNew(m.Slot)) {
			t.Fatalf("move %d: slot %d is busy", i, m.Slot)
		}
		owners[m.Slot] = m.To
	}
	count := map[string]int{}
	for _, o := range owners {
		count[o]++
	}
	var totalW, downSlots int
	for _, c := range p.Nodes {
		if c.State == StateDown {
			downSlots += c.SlotsBefore
		}
	}
	for _, n := range in.Nodes {
		if n.State == StateActive {
			totalW += n.Weight
		}
	}
	for _, c := range p.Nodes {
		if count[c.ID] != c.SlotsAfter {
			t.Fatalf("node %s: plan says %d after, applying it gives %d", c.ID, c.SlotsAfter, count[c.ID])
		}
		exact := 0.0
		switch c.State {
		case StateActive:
			exact = float64(slots.Count-downSlots) * float64(c.Weight) / float64(totalW)
		case StateDown:
			exact = float64(c.SlotsBefore) // no move copies from a down node
		}
		if math.Abs(float64(c.SlotsAfter)-exact) >= 1 {
			t.Fatalf("node %s: %d slots after, exact share %.3f", c.ID, c.SlotsAfter, exact)
		}
	}
	var want int
	for _, c := range p.Nodes {
		want += max(0, c.SlotsBefore-c.SlotsAfter)
	}
	if len(p.Moves) != want {
		t.Fatalf("%d moves, minimum is %d", len(p.Moves), want)
	}
}

func TestCompute(t *testing.T) {
	abc := evenOwners("a", "b", "c")
	drainB := active("a", "b", "c")
	drainB[1].State = StateDraining
	weighted := active("a", "b", "c")
	weighted[2].Weight = 2
	downC := active("a", "b", "c", "d")
	downC[2].State = StateDown
	busy := &slots.Set{}
	busy.AddRange(slots.MustNew(0), slots.MustNew(99))

	cases := []struct {
		name  string
		in    Input
		moves int
	}{
		{"balanced: nothing to do", Input{Owners: abc, Nodes: active("a", "b", "c")}, 0},
		{"add a fourth node", Input{Owners: abc, Nodes: active("a", "b", "c", "d")}, 4096},
		{"drain one of three", Input{Owners: abc, Nodes: drainB}, 5461},
		{"weight 2 on c", Input{Owners: abc, Nodes: weighted}, 2731},
		{"down node keeps its slots, new node filled", Input{Owners: abc, Nodes: downC}, 3641},
		{"busy slots skipped", Input{Owners: abc, Nodes: active("a", "b", "c", "d"), Busy: busy}, 4096},
		{"one node to sixteen", Input{Owners: evenOwners("a"), Nodes: active("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p")}, 15360},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compute(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, tc.in, p)
			if len(p.Moves) != tc.moves {
				t.Fatalf("%d moves, want %d", len(p.Moves), tc.moves)
			}
			// A full plan ends at every node's target; Targets agrees with
			// the planner whatever the order of the nodes.
			in := slices.Clone(tc.in.Nodes)
			slices.Reverse(in)
			cur := make([]int, len(in))
			for i, n := range in {
				for _, o := range tc.in.Owners {
					if o == n.ID {
						cur[i]++
					}
				}
			}
			want := map[string]int{}
			for i, tg := range Targets(in, cur) {
				want[in[i].ID] = tg
			}
			for _, n := range p.Nodes {
				busyLeft := tc.in.Busy != nil && n.SlotsAfter != n.TargetSlots
				if n.TargetSlots != want[n.ID] || (!busyLeft && n.SlotsAfter != n.TargetSlots) {
					t.Errorf("node %s: target %d (Targets says %d), after %d", n.ID, n.TargetSlots, want[n.ID], n.SlotsAfter)
				}
			}
			again, _ := Compute(tc.in)
			if again.ID != p.ID || !slices.Equal(again.Moves, p.Moves) {
				t.Fatal("same input, different plan")
			}
		})
	}
}

func TestComputeInvalid(t *testing.T) {
	abc := evenOwners("a", "b", "c")
	cases := []struct {
		name string
		in   Input
		want string
	}{
		{"short table", Input{Owners: abc[:10], Nodes: active("a", "b", "c")}, "table has 10 slots"},
		{"owner not in node set", Input{Owners: abc, Nodes: active("a", "b")}, `owned by "c"`},
		{"empty id", Input{Owners: abc, Nodes: append(active("a", "b", "c"), Node{Weight: 1, State: StateActive})}, "empty id"},
		{"duplicate", Input{Owners: abc, Nodes: append(active("a", "b", "c"), Node{ID: "a", Weight: 1, State: StateActive})}, "listed twice"},
		{"zero weight", Input{Owners: abc, Nodes: []Node{{ID: "a", State: StateActive}, {ID: "b", Weight: 1, State: StateActive}, {ID: "c", Weight: 1, State: StateActive}}}, "weight 0"},
		{"bad state", Input{Owners: abc, Nodes: []Node{{ID: "a", Weight: 1, State: "gone"}, {ID: "b", Weight: 1, State: StateActive}, {ID: "c", Weight: 1, State: StateActive}}}, `state "gone"`},
		{"nobody active", Input{Owners: evenOwners("a"), Nodes: []Node{{ID: "a", Weight: 1, State: StateDraining}}}, "no active node"},
		{"bad sizes", Input{Owners: abc, Nodes: active("a", "b", "c"), SlotBytes: make([]int64, 3)}, "sizes for 3 slots"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compute(tc.in)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

func TestCheapestFirstAndInterleaved(t *testing.T) {
	in := Input{Owners: evenOwners("a", "b", "c"), Nodes: active("a", "b", "c", "d", "e"), SlotBytes: make([]int64, slots.Count)}
	for s := range in.SlotBytes {
		in.SlotBytes[s] = int64((s * 7919) % 1000) // sizes in no particular order
	}
	p, err := Compute(in)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, in, p)
	last := map[string]int64{}
	runFrom, runTo, maxFrom, maxTo := 0, 0, 0, 0
	for i, m := range p.Moves {
		if b, ok := last[m.From]; ok && m.Bytes < b {
			t.Fatalf("move %d: donor %s gives %d bytes after %d", i, m.From, m.Bytes, b)
		}
		last[m.From] = m.Bytes
		if i > 0 && p.Moves[i-1].From == m.From {
			runFrom++
		} else {
			runFrom = 1
		}
		if i > 0 && p.Moves[i-1].To == m.To {
			runTo++
		} else {
			runTo = 1
		}
		maxFrom, maxTo = max(maxFrom, runFrom), max(maxTo, runTo)
	}
	if maxFrom > 1 || maxTo > 1 {
		t.Fatalf("longest run of one donor %d, of one recipient %d; want 1 with several of each", maxFrom, maxTo)
	}
}

func TestCheck(t *testing.T) {
	in := Input{Version: 7, Owners: evenOwners("a", "b", "c"), Nodes: active("a", "b", "c", "d")}
	p, err := Compute(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(p, 0, in); err != nil {
		t.Fatalf("fresh plan: %v", err)
	}
	moved := in
	moved.Version = 8
	moved.Owners = slices.Clone(in.Owners)
	moved.Owners[p.Moves[3].Slot] = "b"
	err = Check(p, 0, moved)
	if !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), fmt.Sprintf("slot %d from", p.Moves[3].Slot)) {
		t.Fatalf("owner changed: err = %v", err)
	}
	drained := in
	drained.Nodes = active("a", "b", "c", "d")
	drained.Nodes[3].State = StateDraining
	if err := Check(p, 0, drained); !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "now draining") {
		t.Fatalf("target drained: err = %v", err)
	}
	// Moves already done are not checked again.
	done := in
	done.Owners = slices.Clone(in.Owners)
	done.Owners[p.Moves[0].Slot] = p.Moves[0].To
	if err := Check(p, 1, done); err != nil {
		t.Fatalf("after one move done: %v", err)
	}
}

// TestScenarios runs the planner over testdata/*.txt and compares a summary
// with the expected output below each file's "----" line. Run with -rewrite
// to regenerate the expected output after a deliberate change.
func TestScenarios(t *testing.T) {
	runScenarios(t, filepath.Join("testdata", "*.txt"), func(t *testing.T, input string) string {
		in := parseScenario(t, input)
		p, err := Compute(in)
		switch {
		case err != nil:
			return "error: " + err.Error() + "\n"
		case p.BalanceBy != BalanceSlots:
			checkLoadPlan(t, in, p)
			return summarizeLoad(p)
		default:
			checkPlan(t, in, p)
			return summarize(p)
		}
	})
}

// parseScenario reads lines:
//
//	node ID weight=W [zone=Z] [state=S] [owns=RANGES]
//	bytes RANGES=N
//	throttle BYTES_PER_SECOND
//	busy RANGES
func parseScenario(t *testing.T, text string) Input {
	t.Helper()
	in := Input{Owners: make([]string, slots.Count), PerMove: 2 * time.Millisecond}
	for line := range strings.SplitSeq(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "node":
			n := Node{ID: f[1], Weight: 1, State: StateActive}
			for _, kv := range f[2:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "weight":
					n.Weight, _ = strconv.Atoi(v)
				case "zone":
					n.Zone = v
				case "state":
					n.State = v
				case "owns":
					set := mustSet(t, v)
					for s := range set.All() {
						in.Owners[s.Int()] = n.ID
					}
				}
			}
			in.Nodes = append(in.Nodes, n)
		case "bytes":
			r, v, _ := strings.Cut(f[1], "=")
			b, _ := strconv.ParseInt(v, 10, 64)
			if in.SlotBytes == nil {
				in.SlotBytes = make([]int64, slots.Count)
			}
			set := mustSet(t, r)
			for s := range set.All() {
				in.SlotBytes[s.Int()] = b
			}
		case "throttle":
			in.Throttle, _ = strconv.ParseInt(f[1], 10, 64)
		case "busy":
			set := mustSet(t, f[1])
			in.Busy = &set
		default:
			if parseLoadLine(t, &in, f) {
				continue
			}
			t.Fatalf("unknown scenario line %q", line)
		}
	}
	finishLoads(&in)
	return in
}

func mustSet(t *testing.T, s string) slots.Set {
	t.Helper()
	set, err := slots.ParseSet(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// summarize prints what an operator would check: counts, the bound, per
// node before/after, and the first moves.
func summarize(p *Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "moves %d (minimum %d), bytes %d, estimate %s\n", len(p.Moves), minimumMoves(p), p.TotalBytes, p.Estimate)
	nodes := slices.Clone(p.Nodes)
	slices.SortFunc(nodes, func(a, b NodeChange) int { return strings.Compare(a.ID, b.ID) })
	for _, n := range nodes {
		fmt.Fprintf(&b, "node %s %s w=%d slots %d -> %d bytes %d -> %d\n", n.ID, n.State, n.Weight, n.SlotsBefore, n.SlotsAfter, n.BytesBefore, n.BytesAfter)
	}
	for _, m := range p.Moves[:min(6, len(p.Moves))] {
		fmt.Fprintf(&b, "move %d %s -> %s %dB: %s\n", m.Slot, m.From, m.To, m.Bytes, m.Reason)
	}
	for _, n := range nodes {
		if n.LoadKnown {
			fmt.Fprintf(&b, "node %s ratios bytes %.2f -> %.2f ops %.2f -> %.2f\n", n.ID, n.RatioBefore.Bytes, n.RatioAfter.Bytes, n.RatioBefore.Ops, n.RatioAfter.Ops)
		}
	}
	if p.Note != "" {
		fmt.Fprintf(&b, "note: %s\n", p.Note)
	}
	for _, x := range p.Blocked {
		fmt.Fprintf(&b, "blocked %s %d slots %s: %s\n", x.Node, x.Count, x.Slots, x.Reason)
	}
	return b.String()
}

func BenchmarkCompute1000Nodes(b *testing.B) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("node-%04d", i)
	}
	in := Input{Owners: evenOwners(ids[:900]...), Nodes: active(ids...), SlotBytes: make([]int64, slots.Count)}
	for s := range in.SlotBytes {
		in.SlotBytes[s] = int64(s % 977)
	}
	b.ReportAllocs()
	var moves int
	for b.Loop() {
		p, err := Compute(in)
		if err != nil {
			b.Fatal(err)
		}
		moves = len(p.Moves)
	}
	b.ReportMetric(float64(moves), "moves")
}
