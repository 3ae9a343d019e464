package ringcompat

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/slotd/slotd/slots"
)

func TestInitialAssignment(t *testing.T) {
	cases := []struct {
		name   string
		nodes  []Node
		vnodes int
	}{
		{"one node", []Node{{ID: "a", Weight: 1}}, 128},
		{"three equal", []Node{{ID: "a", Weight: 1}, {ID: "b", Weight: 1}, {ID: "c", Weight: 1}}, 128},
		{"weighted", []Node{{ID: "big", Weight: 3}, {ID: "mid", Weight: 2}, {ID: "small", Weight: 1}}, 64},
		{"one vnode each", []Node{{ID: "a", Weight: 1}, {ID: "b", Weight: 1}, {ID: "c", Weight: 1}, {ID: "d", Weight: 1}}, 1},
		{"zones ignored", []Node{{ID: "a", Weight: 1, Zone: "z1"}, {ID: "b", Weight: 1, Zone: "z1"}, {ID: "c", Weight: 2, Zone: "z2"}}, 16},
		{"ten nodes", numbered(10, 1), 128},
		{"more nodes than fit evenly", numbered(7, 1), 128},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := InitialAssignment(tc.nodes, tc.vnodes)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != slots.Count {
				t.Fatalf("len = %d, want %d", len(got), slots.Count)
			}

			// Any input order gives the same table.
			rng := rand.New(rand.NewPCG(1, 2))
			for range 5 {
				shuffled := slices.Clone(tc.nodes)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				again, err := InitialAssignment(shuffled, tc.vnodes)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, again) {
					t.Fatalf("order of nodes changed the assignment")
				}
			}

			counts := map[string]int{}
			for s, id := range got {
				if id == "" {
					t.Fatalf("slot %d has no owner", s)
				}
				counts[id]++
			}
			totalW, sum := 0, 0
			for _, n := range tc.nodes {
				totalW += n.Weight
			}
			worst := 0.0
			for _, n := range tc.nodes {
				c := counts[n.ID]
				sum += c
				limit := (slots.Count*n.Weight + totalW - 1) / totalW
				if c > limit {
					t.Errorf("node %s holds %d slots, over its cap %d", n.ID, c, limit)
				}
				share := float64(slots.Count) * float64(n.Weight) / float64(totalW)
				worst = max(worst, float64(c)/share)
			}
			if sum != slots.Count {
				t.Errorf("counts sum to %d, want %d", sum, slots.Count)
			}
			t.Logf("max count / weighted share = %.4f", worst)
		})
	}
}

// TestInitialAssignmentFollowsRing checks that the cap only redirects slots
// that must move: a slot leaves its ring owner only when that owner ends up
// exactly at its cap.
func TestInitialAssignmentFollowsRing(t *testing.T) {
	nodes := []Node{{ID: "a", Weight: 1}, {ID: "b", Weight: 2}, {ID: "c", Weight: 1}, {ID: "d", Weight: 3}, {ID: "e", Weight: 1}}
	got, err := InitialAssignment(nodes, 128)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Hash: XXHash, VNodes: 128}, nodes...)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, id := range got {
		counts[id]++
	}
	limit := map[string]int{}
	for _, n := range nodes {
		limit[n.ID] = (slots.Count*n.Weight + 8 - 1) / 8
	}
	moved := 0
	for s, id := range got {
		ringOwner := r.nodes[r.LookupHash(SlotPosition(s))].ID
		if ringOwner == id {
			continue
		}
		moved++
		if counts[ringOwner] != limit[ringOwner] {
			t.Fatalf("slot %d left %s, which holds %d slots under its cap %d", s, ringOwner, counts[ringOwner], limit[ringOwner])
		}
	}
	t.Logf("slots redirected by the cap: %d of %d", moved, slots.Count)
}

func TestInitialAssignmentErrors(t *testing.T) {
	cases := []struct {
		name   string
		nodes  []Node
		vnodes int
		want   error
	}{
		{"no nodes", nil, 128, ErrNoNodes},
		{"zero weight", []Node{{ID: "a", Weight: 0}}, 128, ErrBadWeight},
		{"negative weight", []Node{{ID: "a", Weight: 1}, {ID: "b", Weight: -2}}, 128, ErrBadWeight},
		{"duplicate", []Node{{ID: "a", Weight: 1}, {ID: "b", Weight: 1}, {ID: "a", Weight: 2}}, 128, ErrDuplicateNode},
		{"empty id", []Node{{ID: "", Weight: 1}}, 128, ErrBadNodeID},
		{"zero vnodes", []Node{{ID: "a", Weight: 1}}, 0, ErrBadVNodes},
		{"too many points", []Node{{ID: "a", Weight: 1 << 20}}, 128, ErrTooManyPoints},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := InitialAssignment(tc.nodes, tc.vnodes)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if got != nil {
				t.Fatalf("got a table with an error")
			}
		})
	}
}

// numbered returns nodes "n0".."n<count-1>" of the given weight.
func numbered(count, weight int) []Node {
	nodes := make([]Node, count)
	for i := range nodes {
		nodes[i] = Node{ID: "n" + strconv.Itoa(i), Weight: weight}
	}
	return nodes
}
