package mover

import (
	"math"
	"testing"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover/planner"
)

// TestLoadRatios: a node's measured ratio is its load over its weighted
// share of the known nodes' load, a draining node's load counting in the
// total; nodes of unknown load, not active, or of weight 0 get none.
func TestLoadRatios(t *testing.T) {
	node := func(id string, st directory.NodeState, w int) directory.Node {
		return directory.Node{ID: id, State: st, Weight: w}
	}
	load := func(bytes, reads, writes float64) planner.NodeLoad {
		// Two slots, so that a node's load is a sum.
		return planner.NodeLoad{Slots: []planner.SlotLoad{
			{Slot: 1, Bytes: bytes / 2, Reads: reads / 2, Writes: writes / 2},
			{Slot: 2, Bytes: bytes / 2, Reads: reads / 2, Writes: writes / 2},
		}}
	}
	active := directory.NodeActive
	for _, tc := range []struct {
		name  string
		nodes []directory.Node
		loads map[string]planner.NodeLoad
		dim   string
		want  map[string]float64 // node -> ratio; absent: no ratio
	}{{
		name:  "equal weights",
		nodes: []directory.Node{node("a", active, 1), node("b", active, 1)},
		loads: map[string]planner.NodeLoad{"a": load(300, 0, 0), "b": load(100, 0, 0)},
		dim:   "bytes",
		want:  map[string]float64{"a": 1.5, "b": 0.5},
	}, {
		name:  "weights",
		nodes: []directory.Node{node("a", active, 3), node("b", active, 1)},
		loads: map[string]planner.NodeLoad{"a": load(300, 0, 0), "b": load(100, 0, 0)},
		dim:   "bytes",
		want:  map[string]float64{"a": 1, "b": 1},
	}, {
		name:  "ops are reads and writes",
		nodes: []directory.Node{node("a", active, 1), node("b", active, 1)},
		loads: map[string]planner.NodeLoad{"a": load(0, 30, 10), "b": load(999, 0, 40)},
		dim:   "ops",
		want:  map[string]float64{"a": 1, "b": 1},
	}, {
		name: "a draining node's load goes to the active ones",
		nodes: []directory.Node{node("a", active, 1), node("b", active, 1),
			node("c", directory.NodeDraining, 1)},
		loads: map[string]planner.NodeLoad{"a": load(100, 0, 0), "b": load(100, 0, 0), "c": load(200, 0, 0)},
		dim:   "bytes",
		want:  map[string]float64{"a": 0.5, "b": 0.5},
	}, {
		name:  "unknown load: no ratio, no share",
		nodes: []directory.Node{node("a", active, 1), node("b", active, 1), node("c", active, 1)},
		loads: map[string]planner.NodeLoad{"a": load(300, 0, 0), "b": load(100, 0, 0)},
		dim:   "bytes",
		want:  map[string]float64{"a": 1.5, "b": 0.5},
	}, {
		name:  "weight 0 and down: no ratio",
		nodes: []directory.Node{node("a", active, 1), node("b", active, 0), node("c", directory.NodeDown, 1)},
		loads: map[string]planner.NodeLoad{"a": load(100, 0, 0), "b": load(100, 0, 0), "c": load(100, 0, 0)},
		dim:   "bytes",
		want:  map[string]float64{"a": 1.0 / 3},
	}, {
		name:  "nothing held: balanced",
		nodes: []directory.Node{node("a", active, 1), node("b", active, 2)},
		loads: map[string]planner.NodeLoad{"a": {}, "b": {}},
		dim:   "bytes",
		want:  map[string]float64{"a": 1, "b": 1},
	}, {
		name:  "not a measured dimension",
		nodes: []directory.Node{node("a", active, 1)},
		loads: map[string]planner.NodeLoad{"a": load(100, 0, 0)},
		dim:   "slots",
		want:  map[string]float64{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := loadRatios(tc.nodes, tc.loads, tc.dim)
			if len(got) != len(tc.want) {
				t.Fatalf("ratios %+v, want %v", got, tc.want)
			}
			for _, r := range got {
				want, ok := tc.want[r.Node]
				if !ok || r.Dimension != tc.dim || math.Abs(r.Ratio-want) > 1e-9 {
					t.Fatalf("ratio %+v, want %v in %s", r, tc.want, tc.dim)
				}
			}
		})
	}
}
