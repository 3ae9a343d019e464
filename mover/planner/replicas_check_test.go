package planner

import (
	"fmt"
	"slices"

	"github.com/slotd/slotd/ringcompat"
	"github.com/slotd/slotd/slots"
)

// bootstrapSets is ringcompat's initial replica sets over nodes, all in sync.
func bootstrapSets(nodes []Node, rf int) ([]ReplicaSet, error) {
	rn := make([]ringcompat.Node, len(nodes))
	for i, n := range nodes {
		rn[i] = ringcompat.Node{ID: n.ID, Weight: n.Weight, Zone: n.Zone}
	}
	sets, err := ringcompat.InitialReplicas(rn, ringcompat.DefaultVNodes, rf)
	if err != nil {
		return nil, err
	}
	out := make([]ReplicaSet, len(sets))
	for s, set := range sets {
		out[s] = ReplicaSet{ISR: set}
	}
	return out, nil
}

// applySteps runs p's steps over in.Sets the way the executor would, and
// returns the sets at the end, or an error naming the first step that
// breaks a rule: a step that does not fit the set it runs on, a second
// replica of a slot in a zone (rf > 1), the primary removed, an
// ISR below min_isr, a step on a busy slot or onto a node that is not
// active. It is written apart from the planner so it checks it.
func applySteps(in ReplicaInput, p *ReplicaPlan) ([]ReplicaSet, error) {
	nodes := map[string]Node{}
	for _, n := range in.Nodes {
		nodes[n.ID] = n
	}
	sets := make([]ReplicaSet, len(in.Sets))
	for s, set := range in.Sets {
		sets[s] = ReplicaSet{ISR: slices.Clone(set.ISR), Learners: slices.Clone(set.Learners)}
	}
	for k, st := range p.Steps {
		fail := func(format string, a ...any) error {
			return fmt.Errorf("step %d (%s): %s", k, st, fmt.Sprintf(format, a...))
		}
		if st.Slot < 0 || st.Slot >= len(sets) {
			return nil, fail("no such slot")
		}
		if in.Busy != nil && in.Busy.Contains(slots.MustNew(st.Slot)) {
			return nil, fail("slot is busy")
		}
		set := &sets[st.Slot]
		member := slices.Contains(set.ISR, st.Node) || slices.Contains(set.Learners, st.Node)
		switch st.Kind {
		case StepAddLearner:
			if member {
				return nil, fail("already a replica")
			}
			if nodes[st.Node].State != StateActive {
				return nil, fail("onto a node that is %s", nodes[st.Node].State)
			}
			// Only an add puts a replica in a zone: checking it here keeps
			// every set from a valid start valid, and lets a start that
			// already breaks the rule be repaired.
			if z := nodes[st.Node].Zone; in.RF > 1 && slices.ContainsFunc(slices.Concat(set.ISR, set.Learners), func(m string) bool { return nodes[m].Zone == z }) {
				return nil, fail("a second replica in zone %s: %v", z, set)
			}
			set.Learners = append(set.Learners, st.Node)
		case StepJoinISR:
			i := slices.Index(set.Learners, st.Node)
			if i < 0 {
				return nil, fail("not a learner")
			}
			set.Learners = slices.Delete(set.Learners, i, i+1)
			set.ISR = append(set.ISR, st.Node)
		case StepTransferPrimary:
			i := slices.Index(set.ISR, st.Node)
			if set.Primary() != st.From || i < 0 {
				return nil, fail("primary is %s, ISR %v", set.Primary(), set.ISR)
			}
			set.ISR[0], set.ISR[i] = set.ISR[i], set.ISR[0]
		case StepRemoveReplica:
			if !member {
				return nil, fail("not a replica")
			}
			if set.Primary() == st.Node {
				return nil, fail("removes the primary")
			}
			if i := slices.Index(set.ISR, st.Node); i >= 0 {
				if len(set.ISR)-1 < in.MinISR {
					return nil, fail("ISR %v would fall below min_isr %d", set.ISR, in.MinISR)
				}
				set.ISR = slices.Delete(set.ISR, i, i+1)
			} else {
				set.Learners = slices.DeleteFunc(set.Learners, func(n string) bool { return n == st.Node })
			}
		default:
			return nil, fail("unknown kind")
		}
	}
	return sets, nil
}
