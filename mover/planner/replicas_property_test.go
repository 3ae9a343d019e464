package planner

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

var replicaSeed = flag.Uint64("replica-seed", 0, "run TestReplicaProperties on this one seed (0: the usual range)")

// TestReplicaProperties plans random clusters (zones, weights, states, a
// bootstrap at some rf, stray learners, then a new rf and min_isr) and
// applies every plan step by step: no intermediate set ever holds two
// replicas of a slot in one zone, removes a primary or takes an ISR below
// min_isr, and every plan ends with min(rf, zones with an active node)
// replicas on active nodes for each slot whose primary is up. The same
// input gives the same plan. A failure names its seed; rerun it alone with
// -replica-seed.
func TestReplicaProperties(t *testing.T) {
	seeds := make([]uint64, 30)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	if *replicaSeed != 0 {
		seeds = []uint64{*replicaSeed}
	}
	planned := 0
	for _, seed := range seeds {
		in, err := randomReplicaInput(seed)
		if err != nil {
			t.Fatalf("seed %d: building the cluster: %v", seed, err)
		}
		p, err := ComputeReplicas(in)
		if want := policyRefused(in); want != (err != nil) || (err != nil && !errors.Is(err, ErrPolicy)) {
			t.Fatalf("seed %d: rf %d over %v: err = %v, want a policy error: %v", seed, in.RF, in.Nodes, err, want)
		}
		if err != nil {
			continue
		}
		planned++
		if err := checkReplicaPlan(in, p); err != nil {
			t.Fatalf("seed %d (rf %d, min_isr %d, %d nodes): %v", seed, in.RF, in.MinISR, len(in.Nodes), err)
		}
		again, err := ComputeReplicas(in)
		if err != nil || again.ID != p.ID || !slices.Equal(again.Steps, p.Steps) {
			t.Fatalf("seed %d: same input, different plan (%v)", seed, err)
		}
	}
	if planned < len(seeds)*3/4 {
		t.Fatalf("only %d of %d random clusters were plannable: the generator tests too little", planned, len(seeds))
	}
}

// policyRefused says, apart from the planner, whether rf needs more zones
// than the nodes not draining are in.
func policyRefused(in ReplicaInput) bool {
	zones := map[string]bool{}
	for _, n := range in.Nodes {
		if n.State != StateDraining {
			zones[n.Zone] = true
		}
	}
	return in.RF > 1 && in.RF > len(zones)
}

// randomReplicaInput builds one random cluster from seed.
func randomReplicaInput(seed uint64) (ReplicaInput, error) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var nodes []Node
	zones := 2 + r.IntN(4)
	for z := range zones {
		for k := range 1 + r.IntN(4) {
			nodes = append(nodes, Node{ID: fmt.Sprintf("z%dn%d", z, k), Zone: fmt.Sprintf("z%d", z), Weight: 1 + r.IntN(3), State: StateActive})
		}
	}
	// Bootstrap over all but a few nodes (those join now), at some rf.
	var old []Node
	for _, n := range nodes {
		if r.IntN(5) > 0 || len(old) == 0 {
			old = append(old, n)
		}
	}
	oldZones := map[string]bool{}
	for _, n := range old {
		oldZones[n.Zone] = true
	}
	sets, err := bootstrapSets(old, 1+r.IntN(min(MaxRF, len(oldZones))))
	if err != nil {
		return ReplicaInput{}, err
	}
	// Some slots hold a learner in a zone they lack.
	for s := range sets {
		if r.IntN(50) != 0 {
			continue
		}
		n := nodes[r.IntN(len(nodes))]
		if !slices.ContainsFunc(sets[s].ISR, func(id string) bool { return zoneOf(nodes, id) == n.Zone }) {
			sets[s].Learners = []string{n.ID}
		}
	}
	// Then some nodes drain or go down; one stays active.
	for i := range nodes {
		switch r.IntN(10) {
		case 0:
			nodes[i].State = StateDraining
		case 1:
			nodes[i].State = StateDown
		}
	}
	if !slices.ContainsFunc(nodes, func(n Node) bool { return n.State == StateActive }) {
		nodes[0].State = StateActive
	}
	rf := 1 + r.IntN(min(MaxRF, zones))
	in := ReplicaInput{Version: seed, Sets: sets, Nodes: nodes, RF: rf, MinISR: 1 + r.IntN(rf)}
	r.Shuffle(len(in.Nodes), func(i, j int) { in.Nodes[i], in.Nodes[j] = in.Nodes[j], in.Nodes[i] })
	return in, nil
}

func zoneOf(nodes []Node, id string) string {
	for _, n := range nodes {
		if n.ID == id {
			return n.Zone
		}
	}
	return ""
}

// checkReplicaPlan applies p to in and checks where it ends. Every step's
// rules are applySteps'; the end is checked where min_isr leaves room to
// replace a replica inside its zone (min_isr < rf, or rf 1): each slot
// whose primary is up has min(rf, zones with an active node) replicas on
// active nodes, none on a draining node, and down ones only in zones with no
// active node.
func checkReplicaPlan(in ReplicaInput, p *ReplicaPlan) error {
	sets, err := applySteps(in, p)
	if err != nil {
		return err
	}
	state, zone := map[string]string{}, map[string]string{}
	activeZones := map[string]bool{}
	for _, n := range in.Nodes {
		state[n.ID], zone[n.ID] = n.State, n.Zone
		if n.State == StateActive {
			activeZones[n.Zone] = true
		}
	}
	if in.MinISR == in.RF && in.RF > 1 {
		return nil
	}
	want := min(in.RF, len(activeZones))
	for s, set := range sets {
		if state[set.Primary()] == StateDown {
			continue
		}
		active := 0
		for _, m := range slices.Concat(set.ISR, set.Learners) {
			switch state[m] {
			case StateActive:
				active++
			case StateDraining:
				return fmt.Errorf("slot %d keeps a replica on draining %s: %v", s, m, set)
			case StateDown:
				if activeZones[zone[m]] {
					return fmt.Errorf("slot %d keeps a replica on down %s, whose zone has an active node: %v", s, m, set)
				}
			}
		}
		if active != want {
			return fmt.Errorf("slot %d ends with %d replicas on active nodes, want %d: %v", s, active, want, set)
		}
	}
	return nil
}
