package planner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/slotd/slotd/slots"
)

// zoned returns n nodes in each of the zones, active, weight 1.
func zoned(n int, zones ...string) []Node {
	var out []Node
	for _, z := range zones {
		for k := range n {
			out = append(out, Node{ID: fmt.Sprintf("%s-%d", z, k), Zone: z, Weight: 1, State: StateActive})
		}
	}
	return out
}

func mustBootstrap(t testing.TB, nodes []Node, rf int) []ReplicaSet {
	t.Helper()
	sets, err := bootstrapSets(nodes, rf)
	if err != nil {
		t.Fatal(err)
	}
	return sets
}

func TestComputeReplicasInvalid(t *testing.T) {
	nodes := zoned(2, "z1", "z2", "z3")
	sets := mustBootstrap(t, nodes, 3)
	noZone := slices.Clone(nodes)
	noZone[0].Zone = ""
	unknown := slices.Clone(sets)
	unknown[7] = ReplicaSet{ISR: []string{sets[7].Primary(), "ghost"}}
	twice := slices.Clone(sets)
	twice[9] = ReplicaSet{ISR: []string{"z1-0", "z2-0"}, Learners: []string{"z1-0"}}
	empty := slices.Clone(sets)
	empty[3] = ReplicaSet{}
	in := func(rf, minISR int) ReplicaInput {
		return ReplicaInput{Sets: sets, Nodes: nodes, RF: rf, MinISR: minISR}
	}
	cases := []struct {
		name string
		in   ReplicaInput
		is   error
		want string
	}{
		{"rf 0", in(0, 1), ErrPolicy, "rf 0; want 1-5"},
		{"rf 6", in(6, 1), ErrPolicy, "rf 6; want 1-5"},
		{"rf above the zones", in(4, 2), ErrPolicy, "rf 4 needs 4 zones with active nodes, the nodes are in 3 (z1, z2, z3)"},
		{"min_isr 0", in(3, 0), ErrPolicy, "min_isr 0 with rf 3"},
		{"min_isr above rf", in(2, 3), ErrPolicy, "min_isr 3 with rf 2"},
		{"active node without a zone", ReplicaInput{Sets: sets, Nodes: noZone, RF: 3, MinISR: 2}, ErrNoZone, "z1-0 is active without a zone and rf is 3"},
		{"unknown node", ReplicaInput{Sets: unknown, Nodes: nodes, RF: 3, MinISR: 2}, ErrUnknownNode, `slot 7 has a replica on "ghost"`},
		{"node twice in a set", ReplicaInput{Sets: twice, Nodes: nodes, RF: 3, MinISR: 2}, ErrInvalid, "slot 9 lists a node twice"},
		{"slot without primary", ReplicaInput{Sets: empty, Nodes: nodes, RF: 3, MinISR: 2}, ErrInvalid, "slot 3 has no primary"},
		{"short table", ReplicaInput{Sets: sets[:5], Nodes: nodes, RF: 3, MinISR: 2}, ErrInvalid, "5 replica sets"},
		{"nobody active", ReplicaInput{Sets: sets, Nodes: func() []Node {
			ns := slices.Clone(nodes)
			for i := range ns {
				ns[i].State = StateDraining
			}
			return ns
		}(), RF: 1, MinISR: 1}, ErrInvalid, "no active node"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ComputeReplicas(tc.in)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line wrapping %v containing %q", err, tc.is, tc.want)
			}
		})
	}
}

// TestReplicaRules covers the rules the scenarios and the property test do
// not reach: min_isr equal to rf forbids replacing a replica inside its
// zone, busy slots are left alone, a second replica in a zone is removed,
// a zone-less node may drain at rf > 1, and rf 1 moves within a zone.
func TestReplicaRules(t *testing.T) {
	nodes := zoned(2, "z1", "z2")
	sets := mustBootstrap(t, nodes[:3], 2) // z1-0, z1-1, z2-0
	drainZ1 := slices.Clone(nodes)
	drainZ1[0].State = StateDraining
	busy := &slots.Set{}
	busy.AddRange(slots.MustNew(0), slots.MustNew(99))
	dup := slices.Clone(sets)
	dup[5] = ReplicaSet{ISR: []string{"z1-0", "z2-0", "z1-1"}}
	zoneless := append(slices.Clone(nodes), Node{ID: "old", Weight: 1, State: StateDraining})
	withOld := slices.Clone(sets)
	withOld[11] = ReplicaSet{ISR: []string{withOld[11].Primary()}, Learners: []string{"old"}}
	rf1 := make([]ReplicaSet, slots.Count)
	for s := range rf1 {
		rf1[s] = ReplicaSet{ISR: []string{"z1-0"}}
	}

	cases := []struct {
		name  string
		in    ReplicaInput
		check func(t *testing.T, p *ReplicaPlan)
	}{
		{"min_isr = rf blocks a drain inside the zone", ReplicaInput{Sets: sets, Nodes: drainZ1, RF: 2, MinISR: 2}, func(t *testing.T, p *ReplicaPlan) {
			if !slices.ContainsFunc(p.Blocked, func(b Blocked) bool { return b.Node == "z1-0" && strings.Contains(b.Reason, "min_isr 2") }) {
				t.Fatalf("blocked %+v, want z1-0's replicas kept for min_isr", p.Blocked)
			}
			for _, st := range p.Steps {
				if st.Kind == StepRemoveReplica && st.Node == "z1-0" {
					t.Fatalf("%s: removes a replica of the draining node below min_isr", st)
				}
			}
		}},
		{"busy slots are left alone", ReplicaInput{Sets: sets, Nodes: nodes, RF: 2, MinISR: 1, Busy: busy}, func(t *testing.T, p *ReplicaPlan) {
			if len(p.Steps) == 0 {
				t.Fatal("no steps: z2-1 is new and should be filled")
			}
			for _, st := range p.Steps {
				if busy.Contains(slots.MustNew(st.Slot)) {
					t.Fatalf("%s: touches a busy slot", st)
				}
			}
		}},
		{"a second replica in a zone goes", ReplicaInput{Sets: dup, Nodes: nodes, RF: 2, MinISR: 1}, func(t *testing.T, p *ReplicaPlan) {
			if !slices.ContainsFunc(p.Steps, func(st Step) bool { return st.Slot == 5 && st.Kind == StepRemoveReplica && st.Node == "z1-1" }) {
				t.Fatal("slot 5 keeps two replicas in z1")
			}
		}},
		{"a zone-less node drains at rf 2", ReplicaInput{Sets: withOld, Nodes: zoneless, RF: 2, MinISR: 1}, func(t *testing.T, p *ReplicaPlan) {
			if !slices.ContainsFunc(p.Steps, func(st Step) bool { return st.Slot == 11 && st.Kind == StepRemoveReplica && st.Node == "old" }) {
				t.Fatal("slot 11 keeps its learner on the draining zone-less node")
			}
		}},
		{"rf 1 moves within a zone", ReplicaInput{Sets: rf1, Nodes: nodes, RF: 1, MinISR: 1}, func(t *testing.T, p *ReplicaPlan) {
			for _, n := range p.Nodes {
				if n.ReplicasAfter != n.TargetReplicas || n.TargetReplicas != slots.Count/4 {
					t.Fatalf("node %s ends with %d replicas, target %d, want %d", n.ID, n.ReplicasAfter, n.TargetReplicas, slots.Count/4)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ComputeReplicas(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := applySteps(tc.in, p); err != nil {
				t.Fatal(err)
			}
			tc.check(t, p)
		})
	}
}

// BenchmarkReplicaAdd100 plans 1,000 nodes in 10 zones at rf 3 gaining 100
// nodes, ten in each zone.
func BenchmarkReplicaAdd100(b *testing.B) {
	var nodes []Node
	for z := range 10 {
		for k := range 110 {
			nodes = append(nodes, Node{ID: fmt.Sprintf("z%02d-n%03d", z, k), Zone: fmt.Sprintf("z%02d", z), Weight: 1, State: StateActive})
		}
	}
	var old []Node
	for _, n := range nodes {
		if n.ID[len(n.ID)-3:] < "100" {
			old = append(old, n)
		}
	}
	in := ReplicaInput{Sets: mustBootstrap(b, old, 3), Nodes: nodes, RF: 3, MinISR: 2, SlotBytes: make([]int64, slots.Count)}
	for s := range in.SlotBytes {
		in.SlotBytes[s] = int64(s % 977)
	}
	b.ReportAllocs()
	var steps int
	for b.Loop() {
		p, err := ComputeReplicas(in)
		if err != nil {
			b.Fatal(err)
		}
		steps = len(p.Steps)
	}
	b.ReportMetric(float64(steps), "steps")
}
