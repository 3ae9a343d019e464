package planner

// The replica plan itself: each slot's steps with their reasons, in order,
// and what the plan leaves: per node and zone, under-replicated and blocked
// slots.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/slotd/slotd/slots"
)

func (rp *replicaPlanner) plan() (*ReplicaPlan, error) {
	p := &ReplicaPlan{BaseVersion: rp.in.Version, RF: rp.in.RF, MinISR: rp.in.MinISR}
	var all []slotSteps
	for s := range rp.want {
		if rp.fixed[s] {
			continue
		}
		d := &rp.want[s]
		st, ok := rp.steps(s, d)
		if !ok { // unreachable: every wanted set was committed with its steps
			return nil, fmt.Errorf("%w: slot %d has no steps to its planned set", ErrInvalid, s)
		}
		if len(st) == 0 {
			continue
		}
		steps := make([]Step, len(st))
		for k, r := range st {
			steps[k] = Step{Kind: r.kind, Slot: s, Node: rp.id(r.node), Reason: rp.stepReason(d, r)}
			switch r.kind {
			case StepTransferPrimary:
				steps[k].From = rp.id(r.from)
			case StepAddLearner:
				steps[k].Bytes = rp.bytes(s)
				p.TotalBytes += steps[k].Bytes
			}
		}
		all = append(all, slotSteps{slot: s, class: d.class, donor: rp.cur[s].isr[0], steps: steps})
	}
	p.Steps = rp.order(all)
	rp.summarize(p)
	p.UnderReplicated = rp.underReplicated()
	p.Blocked = rp.blocked()
	p.HotSpots = rp.hot
	if len(p.Steps) == 0 {
		p.Note = "nothing to do"
	}
	h := xxhash.New()
	fmt.Fprintf(h, "%d/%d/%d", p.BaseVersion, p.RF, p.MinISR)
	for _, st := range p.Steps {
		fmt.Fprintf(h, "|%s", st)
	}
	p.ID = fmt.Sprintf("r-%d-%012x", p.BaseVersion, h.Sum64()>>16)
	return p, nil
}

// stepReason is the reason a step is taken, from the notes of the change
// that called for it.
func (rp *replicaPlanner) stepReason(d *dset, r rstep) string {
	if r.kind != StepTransferPrimary {
		return d.reason(r.node)
	}
	if r.node == d.primary && d.primaryWhy != "" {
		if !d.has(r.from) {
			return d.primaryWhy + "; no copy"
		}
		return d.primaryWhy
	}
	return fmt.Sprintf("%s leaves the slot's set: %s holds the primary until %s is in sync; no copy", rp.id(r.from), rp.id(r.node), rp.id(d.primary))
}

// summarize fills each node's and zone's counts before and after.
func (rp *replicaPlanner) summarize(p *ReplicaPlan) {
	n := len(rp.nodes)
	before, pBefore := make([]int, n), make([]int, n)
	lb, la := make([]Load, n), make([]Load, n)
	zb, za := make([]int, len(rp.zones)), make([]int, len(rp.zones))
	for s, c := range rp.cur {
		b := float64(rp.bytes(s))
		for _, m := range slices.Concat(c.isr, c.learners) {
			before[m]++
			lb[m].Bytes += b
			zb[rp.zone[m]]++
		}
		pBefore[c.isr[0]]++
		d := &rp.want[s]
		for _, m := range d.members {
			la[m].Bytes += b
			za[rp.zone[m]]++
		}
		if rp.ops != nil && d.primary >= 0 {
			lb[c.isr[0]].Ops += rp.ops[s]
			la[d.primary].Ops += rp.ops[s]
		}
	}
	for i, nd := range rp.nodes {
		p.Nodes = append(p.Nodes, ReplicaNode{
			ID: nd.ID, Zone: nd.Zone, State: nd.State, Weight: nd.Weight,
			ReplicasBefore: before[i], ReplicasAfter: rp.count[i], TargetReplicas: rp.target[i],
			PrimariesBefore: pBefore[i], PrimariesAfter: rp.prim[i], TargetPrimaries: rp.ptarget[i],
			LoadBefore: lb[i], LoadAfter: la[i],
		})
	}
	for z, name := range rp.zones {
		if name == "" {
			continue // a node without a zone: shown as a node
		}
		active := 0
		for _, i := range rp.zoneNodes[z] {
			if rp.active[i] {
				active++
			}
		}
		p.Zones = append(p.Zones, ReplicaZone{Zone: name, Active: active, ReplicasBefore: zb[z], ReplicasAfter: za[z], TargetReplicas: rp.ztarget[z]})
	}
	slices.SortFunc(p.Zones, func(a, b ReplicaZone) int { return cmp.Compare(a.Zone, b.Zone) })
}

// underReplicated groups the slots the plan leaves with fewer live replicas
// than rf by how many they have and why.
func (rp *replicaPlanner) underReplicated() []UnderReplicated {
	type key struct {
		n      int
		reason string
	}
	groups := map[key]*slots.Set{}
	for s := range rp.want {
		d := &rp.want[s]
		live := rp.live(d)
		if live >= rp.in.RF {
			continue
		}
		k := key{live, rp.shortReason(s, d)}
		if groups[k] == nil {
			groups[k] = &slots.Set{}
		}
		groups[k].Add(slots.MustNew(s))
	}
	var out []UnderReplicated
	for k, set := range groups {
		out = append(out, UnderReplicated{Slots: set.String(), Count: set.Count(), Replicas: k.n, Reason: k.reason})
	}
	slices.SortFunc(out, func(a, b UnderReplicated) int {
		if c := cmp.Compare(a.Replicas, b.Replicas); c != 0 {
			return c
		}
		return cmp.Compare(a.Reason, b.Reason)
	})
	return out
}

// shortReason says why slot s stays below rf.
func (rp *replicaPlanner) shortReason(s int, d *dset) string {
	p := rp.cur[s].isr[0]
	switch {
	case rp.down[p]:
		return fmt.Sprintf("primary %s is down: failover to an in-sync replica comes before any step", rp.id(p))
	case rp.fixed[s]:
		return "a step is in flight: plan again after it"
	case rp.need < rp.in.RF:
		var lost []string
		for z, ns := range rp.zoneNodes {
			if rp.zones[z] != "" && !slices.ContainsFunc(ns, func(i int) bool { return rp.active[i] }) {
				lost = append(lost, rp.zones[z])
			}
		}
		return fmt.Sprintf("%d zones have an active node, rf is %d (no active node in %s); a zone never holds two replicas of a slot",
			rp.azones, rp.in.RF, strings.Join(lost, ", "))
	}
	for _, m := range d.members {
		if rp.down[m] {
			return fmt.Sprintf("its replica on %s (down) holds zone %s: replacing it in that zone would take the ISR below min_isr %d", rp.id(m), rp.zoneName(m), rp.in.MinISR)
		}
	}
	return "no zone the slot lacks has an active node to take a replica"
}

// blocked lists, by node, the slots no step touches because their primary
// is down, and the replicas a draining node keeps because no replacement
// keeps the zone rule and min_isr.
func (rp *replicaPlanner) blocked() []Blocked {
	down := make([]slots.Set, len(rp.nodes))
	stay := make([]slots.Set, len(rp.nodes))
	for s := range rp.want {
		if p := rp.cur[s].isr[0]; rp.down[p] {
			down[p].Add(slots.MustNew(s))
			continue
		}
		for _, m := range rp.want[s].members {
			if !rp.fixed[s] && rp.nodes[m].State == StateDraining {
				stay[m].Add(slots.MustNew(s))
			}
		}
	}
	var out []Blocked
	for i, n := range rp.nodes {
		if c := down[i].Count(); c > 0 {
			out = append(out, Blocked{Node: n.ID, Slots: down[i].String(), Count: c,
				Reason: fmt.Sprintf("%s is down and the primary of these slots: they wait for failover, and no step copies from a down primary", n.ID)})
		}
		if c := stay[i].Count(); c > 0 {
			out = append(out, Blocked{Node: n.ID, Slots: stay[i].String(), Count: c,
				Reason: fmt.Sprintf("%s is draining but keeps these replicas: no replacement keeps the zone rule and min_isr %d", n.ID, rp.in.MinISR)})
		}
	}
	return out
}
