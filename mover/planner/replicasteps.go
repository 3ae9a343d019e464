package planner

// A slot's steps from its current set to its wanted one, and the order of
// every slot's steps in the plan.

import (
	"cmp"
	"slices"
)

// rstep is a step by node index.
type rstep struct {
	kind       StepKind
	node, from int
}

// steps returns the steps that take slot s from its current set to d, and
// false when there are none that keep every intermediate set within the
// rules: no two replicas in one zone (rf > 1), the primary never removed,
// no ISR below min_isr. The order:
//
//  1. A primary leaving the set hands over first, to d's primary if it is in
//     the ISR, else to the first in-sync member that stays: no copy.
//  2. Learners that stay join the ISR.
//  3. Members in zones the set does not hold are added (then join).
//  4. Members that leave are removed, first those whose zone a member to be
//     added needs, then learners, then the rest; never below min_isr.
//  5. Last, the primary is handed to d's primary if it is not yet.
func (rp *replicaPlanner) steps(s int, d *dset) ([]rstep, bool) {
	c := rp.cur[s]
	isr, learners := slices.Clone(c.isr), slices.Clone(c.learners)
	var out []rstep
	holds := func(z int) bool {
		for _, m := range isr {
			if rp.zone[m] == z {
				return true
			}
		}
		for _, m := range learners {
			if rp.zone[m] == z {
				return true
			}
		}
		return false
	}
	in := func(n int) bool { return slices.Contains(isr, n) || slices.Contains(learners, n) }
	for range 4*(len(isr)+len(learners)+len(d.members)) + 4 {
		p := isr[0]
		if !d.has(p) {
			q := -1
			if d.primary >= 0 && slices.Contains(isr, d.primary) {
				q = d.primary
			} else if k := slices.IndexFunc(isr[1:], d.has); k >= 0 {
				q = isr[1+k]
			}
			if q >= 0 {
				out = append(out, rstep{StepTransferPrimary, q, p})
				isr = slices.DeleteFunc(isr, func(n int) bool { return n == q })
				isr = slices.Insert(isr, 0, q)
				continue
			}
		}
		if k := slices.IndexFunc(learners, d.has); k >= 0 {
			l := learners[k]
			out = append(out, rstep{StepJoinISR, l, -1})
			learners = slices.Delete(learners, k, k+1)
			isr = append(isr, l)
			continue
		}
		added := false
		for _, m := range d.members {
			if !in(m) && !(rp.veto && holds(rp.zone[m])) {
				out = append(out, rstep{StepAddLearner, m, -1})
				learners = append(learners, m)
				added = true
				break
			}
		}
		if added {
			continue
		}
		if r := rp.removable(d, isr, learners); r >= 0 {
			out = append(out, rstep{StepRemoveReplica, r, -1})
			isr = slices.DeleteFunc(isr, func(n int) bool { return n == r })
			learners = slices.DeleteFunc(learners, func(n int) bool { return n == r })
			continue
		}
		if len(isr)+len(learners) != len(d.members) || slices.ContainsFunc(d.members, func(m int) bool { return !in(m) }) {
			return nil, false // members left to add or remove, and no step allowed
		}
		if d.primary >= 0 && d.primary != isr[0] {
			out = append(out, rstep{StepTransferPrimary, d.primary, isr[0]})
		}
		return out, true
	}
	return nil, false
}

// removable returns the member of isr or learners not in d that may be
// removed next, or -1: never the primary, never an ISR member that would
// leave fewer than min_isr in sync. Members whose zone a member of d still
// to be added needs go first, then learners, then the rest.
func (rp *replicaPlanner) removable(d *dset, isr, learners []int) int {
	needed := func(r int) bool {
		for _, m := range d.members {
			if rp.zone[m] == rp.zone[r] && m != r && !slices.Contains(isr, m) && !slices.Contains(learners, m) {
				return true
			}
		}
		return false
	}
	best, bestRank := -1, 0
	consider := func(r, rank int) {
		if d.has(r) || r == isr[0] {
			return
		}
		if needed(r) {
			rank += 10
		}
		if best < 0 || rank > bestRank {
			best, bestRank = r, rank
		}
	}
	for _, r := range learners {
		consider(r, 1)
	}
	if len(isr)-1 >= rp.in.MinISR {
		for _, r := range isr {
			consider(r, 0)
		}
	}
	return best
}

// slotSteps is one slot's steps and what orders them in the plan.
type slotSteps struct {
	slot  int
	class int
	donor int // the primary the copies come from
	steps []Step
}

// order lists every slot's steps: first the transfers that take primaries
// off draining nodes (they copy nothing and cut the node's traffic at once),
// then each slot's remaining steps together, by class (drains, then rf,
// then balance, then primary transfers), taking the slots' donors in turn
// so no node copies a long run of slots.
func (rp *replicaPlanner) order(all []slotSteps) []Step {
	var out []Step
	var rest []slotSteps
	var lead []slotSteps
	for _, ss := range all {
		if first := ss.steps[0]; first.Kind == StepTransferPrimary && rp.nodes[rp.index[first.From]].State == StateDraining {
			lead = append(lead, slotSteps{slot: ss.slot, donor: rp.index[first.From], steps: ss.steps[:1]})
			ss.steps = ss.steps[1:]
		}
		if len(ss.steps) > 0 {
			rest = append(rest, ss)
		}
	}
	out = append(out, rp.roundRobin(lead)...)
	slices.SortStableFunc(rest, func(a, b slotSteps) int { return cmp.Compare(a.class, b.class) })
	for i := 0; i < len(rest); {
		j := i
		for j < len(rest) && rest[j].class == rest[i].class {
			j++
		}
		out = append(out, rp.roundRobin(rest[i:j])...)
		i = j
	}
	return out
}

// roundRobin lists the groups' steps taking one group per donor in turn, the
// donors in id order and each donor's groups in slot order (as given).
func (rp *replicaPlanner) roundRobin(groups []slotSteps) []Step {
	by := make([][]slotSteps, len(rp.nodes))
	for _, g := range groups {
		by[g.donor] = append(by[g.donor], g)
	}
	var out []Step
	for left := len(groups); left > 0; {
		for i := range by {
			if len(by[i]) == 0 {
				continue
			}
			out = append(out, by[i][0].steps...)
			by[i] = by[i][1:]
			left--
		}
	}
	return out
}
