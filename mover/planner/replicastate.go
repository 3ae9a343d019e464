package planner

// The replica planner's state: each slot's current and wanted set, and the
// counts every goal balances.

import (
	"fmt"
	"slices"

	"github.com/slotd/slotd/slots"
)

// curSet is a slot's replica set as the input holds it, by node index.
type curSet struct {
	isr      []int // the primary first
	learners []int
}

// dset is the set a slot should end with: members by node index in
// increasing order, the primary (-1 until chosen) and the reasons for
// what changed.
type dset struct {
	members []int
	primary int
	// why holds, per node added or removed, the reason; primaryWhy the
	// reason for a new primary.
	why        []note
	primaryWhy string
	// class orders the slot's steps in the plan: lower runs first.
	class int
}

type note struct {
	node int
	why  string
}

// Classes of change, in the order the plan runs them.
const (
	classDrain   = iota // replicas leaving draining or down nodes
	classCount          // reaching rf: removing or adding replicas
	classBalance        // zone and node balance
	classPrimary        // primary transfers alone
)

func (d *dset) clone() dset {
	return dset{members: slices.Clone(d.members), primary: d.primary, why: slices.Clone(d.why), primaryWhy: d.primaryWhy, class: d.class}
}

func (d *dset) has(n int) bool { _, ok := slices.BinarySearch(d.members, n); return ok }

func (d *dset) without(n int) {
	if i, ok := slices.BinarySearch(d.members, n); ok {
		d.members = slices.Delete(d.members, i, i+1)
	}
	if d.primary == n {
		d.primary = -1
	}
}

func (d *dset) with(n int) {
	if i, ok := slices.BinarySearch(d.members, n); !ok {
		d.members = slices.Insert(d.members, i, n)
	}
}

func (d *dset) say(n int, why string) { d.why = append(d.why, note{n, why}) }

// reason returns the note for node n.
func (d *dset) reason(n int) string {
	for i := len(d.why) - 1; i >= 0; i-- {
		if d.why[i].node == n {
			return d.why[i].why
		}
	}
	return ""
}

// replicaPlanner holds one replica plan's computation: the input by node
// index, each slot's current and wanted set, and the counts the goals
// balance. Its methods are the goals, run in order by ComputeReplicas.
type replicaPlanner struct {
	in    ReplicaInput
	nodes []Node // in id order
	index map[string]int

	zone      []int    // zone index of each node
	zones     []string // zone names ("" for a node without a zone: a zone of its own)
	zoneNodes [][]int  // nodes of each zone, in id order
	active    []bool
	down      []bool
	azones    int   // zones with an active node
	zactive   []int // active nodes per zone
	need      int   // replicas per slot: min(rf, azones)
	veto      bool

	cur   []curSet
	want  []dset
	fixed []bool // busy, or a down primary: no step

	count, target   []int   // replicas per node (every slot), target
	zcount, ztarget []int   // replicas per zone on active nodes, target
	prim, ptarget   []int   // primaries per node, target
	droppedOf       [][]int // slots whose replica on the node the plan removes (may be stale)
	slotsOf         [][]int
	cursor          map[[2]int]int // by node and zone: where move's last search stopped
	head            []int          // slotsOf[n][:head[n]] no longer hold n
	ops             []float64
	hot             []HotSpot
}

func newReplicaPlanner(in ReplicaInput) (*replicaPlanner, error) {
	if err := validateReplicas(in, in.Nodes); err != nil {
		return nil, err
	}
	nodes, index := sortedNodes(in.Nodes)
	rp := &replicaPlanner{in: in, nodes: nodes, index: index, veto: in.RF > 1}
	n := len(nodes)
	rp.zone, rp.active, rp.down = make([]int, n), make([]bool, n), make([]bool, n)
	zoneOf := map[string]int{}
	for i, nd := range nodes {
		z, ok := zoneOf[nd.Zone]
		if !ok || nd.Zone == "" {
			z = len(rp.zones)
			rp.zones = append(rp.zones, nd.Zone)
			rp.zoneNodes = append(rp.zoneNodes, nil)
			if nd.Zone != "" {
				zoneOf[nd.Zone] = z
			}
		}
		rp.zone[i] = z
		rp.zoneNodes[z] = append(rp.zoneNodes[z], i)
		rp.active[i], rp.down[i] = nd.State == StateActive, nd.State == StateDown
	}
	rp.zactive = make([]int, len(rp.zones))
	for i := range nodes {
		if rp.active[i] {
			rp.zactive[rp.zone[i]]++
		}
	}
	for _, n := range rp.zactive {
		if n > 0 {
			rp.azones++
		}
	}
	rp.need = min(in.RF, rp.azones)
	if err := rp.readSets(); err != nil {
		return nil, err
	}
	rp.targets()
	return rp, nil
}

// readSets turns the input's sets into node indexes and counts them.
func (rp *replicaPlanner) readSets() error {
	n := len(rp.nodes)
	rp.cur, rp.want, rp.fixed = make([]curSet, slots.Count), make([]dset, slots.Count), make([]bool, slots.Count)
	rp.count, rp.prim, rp.zcount = make([]int, n), make([]int, n), make([]int, len(rp.zones))
	rp.slotsOf, rp.head, rp.droppedOf = make([][]int, n), make([]int, n), make([][]int, n)
	rp.cursor = map[[2]int]int{}
	lookup := func(s int, ids []string) ([]int, error) {
		out := make([]int, len(ids))
		for k, id := range ids {
			i, ok := rp.index[id]
			if !ok {
				return nil, fmt.Errorf("%w: slot %d has a replica on %q, which is not in the node set", ErrUnknownNode, s, id)
			}
			out[k] = i
		}
		return out, nil
	}
	for s, set := range rp.in.Sets {
		if len(set.ISR) == 0 {
			return fmt.Errorf("%w: slot %d has no primary; bootstrap the directory first", ErrInvalid, s)
		}
		isr, err := lookup(s, set.ISR)
		if err != nil {
			return err
		}
		learners, err := lookup(s, set.Learners)
		if err != nil {
			return err
		}
		members := slices.Concat(isr, learners)
		slices.Sort(members)
		if len(slices.Compact(slices.Clone(members))) != len(members) {
			return fmt.Errorf("%w: slot %d lists a node twice in its replica set", ErrInvalid, s)
		}
		rp.cur[s] = curSet{isr: isr, learners: learners}
		rp.want[s] = dset{members: members, primary: isr[0], class: classPrimary}
		rp.fixed[s] = rp.down[isr[0]] || (rp.in.Busy != nil && rp.in.Busy.Contains(slots.MustNew(s)))
		rp.prim[isr[0]]++
		for _, m := range members {
			rp.count[m]++
			if rp.active[m] {
				rp.zcount[rp.zone[m]]++
			}
			rp.slotsOf[m] = append(rp.slotsOf[m], s)
		}
	}
	// Each node gives its cheapest slots first, and the ones it is not the
	// primary of before those it is (moving a primary costs a transfer).
	for i, ss := range rp.slotsOf {
		slices.SortStableFunc(ss, func(a, b int) int {
			pa, pb := rp.want[a].primary == i, rp.want[b].primary == i
			if pa != pb {
				if pa {
					return 1
				}
				return -1
			}
			return compareInt64(rp.bytes(a), rp.bytes(b))
		})
	}
	return nil
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (rp *replicaPlanner) bytes(s int) int64 {
	if rp.in.SlotBytes == nil {
		return 0
	}
	return rp.in.SlotBytes[s]
}

// commit makes d slot s's wanted set if its steps exist (every
// intermediate set keeps the zone rule and min_isr) and reports whether it
// did, keeping the counts in step.
func (rp *replicaPlanner) commit(s int, d dset) bool {
	if _, ok := rp.steps(s, &d); !ok {
		return false
	}
	old := &rp.want[s]
	for _, m := range old.members {
		if !d.has(m) {
			if rp.inCur(s, m) {
				rp.droppedOf[m] = append(rp.droppedOf[m], s)
			}
			rp.count[m]--
			if rp.active[m] {
				rp.zcount[rp.zone[m]]--
			}
		}
	}
	for _, m := range d.members {
		if !old.has(m) {
			rp.count[m]++
			if rp.active[m] {
				rp.zcount[rp.zone[m]]++
			}
			rp.slotsOf[m] = append(rp.slotsOf[m], s)
		}
	}
	if old.primary != d.primary {
		if old.primary >= 0 {
			rp.prim[old.primary]--
		}
		if d.primary >= 0 {
			rp.prim[d.primary]++
		}
	}
	rp.want[s] = d
	return true
}

// holdsZone reports whether d has a member in zone z other than except.
func (rp *replicaPlanner) holdsZone(d *dset, z, except int) bool {
	for _, m := range d.members {
		if m != except && rp.zone[m] == z {
			return true
		}
	}
	return false
}

// live counts d's members on nodes that are not down.
func (rp *replicaPlanner) live(d *dset) int {
	n := 0
	for _, m := range d.members {
		if !rp.down[m] {
			n++
		}
	}
	return n
}

// bestIn returns the active node of zone z, not in d, furthest below its
// replica target (ties: lower index), or -1.
func (rp *replicaPlanner) bestIn(z int, d *dset) int {
	best := -1
	for _, i := range rp.zoneNodes[z] {
		if !rp.active[i] || d.has(i) {
			continue
		}
		if best < 0 || rp.count[i]-rp.target[i] < rp.count[best]-rp.target[best] {
			best = i
		}
	}
	return best
}

// zoneOrder returns the zones with an active node that d may gain a member
// in when it loses leaving (-1: none), emptiest against target first.
func (rp *replicaPlanner) zoneOrder(d *dset, leaving int) []int {
	var zs []int
	for z, ns := range rp.zoneNodes {
		if !slices.ContainsFunc(ns, func(i int) bool { return rp.active[i] && !d.has(i) }) {
			continue
		}
		if rp.veto && rp.holdsZone(d, z, leaving) {
			continue
		}
		zs = append(zs, z)
	}
	slices.SortStableFunc(zs, func(a, b int) int {
		return (rp.zcount[a] - rp.ztarget[a]) - (rp.zcount[b] - rp.ztarget[b])
	})
	return zs
}

func (rp *replicaPlanner) id(i int) string { return rp.nodes[i].ID }

func (rp *replicaPlanner) zoneName(i int) string {
	if z := rp.nodes[i].Zone; z != "" {
		return z
	}
	return "-"
}
