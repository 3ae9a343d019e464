package planner

// The replica goals that place replicas: reach rf, empty draining and down
// nodes, balance zones, then the nodes of each zone.

import (
	"cmp"
	"fmt"
	"slices"
)

// standing says why node i gives a replica: its state, or its count.
func (rp *replicaPlanner) standing(i int) string {
	switch rp.nodes[i].State {
	case StateDraining:
		return rp.id(i) + " is draining"
	case StateDown:
		return rp.id(i) + " is down"
	}
	return fmt.Sprintf("%s holds %d replicas, target %d", rp.id(i), rp.count[i], rp.target[i])
}

// shrink removes what a slot holds beyond the rules: a second replica in a
// zone, replicas beyond rf (down ones first), and live replicas beyond the
// zones that have an active node. It removes the worst first: down, then
// draining, then learners, then the zone and then the node furthest above
// its target.
func (rp *replicaPlanner) shrink() {
	for s := range rp.want {
		if rp.fixed[s] {
			continue
		}
		for {
			d := &rp.want[s]
			cands, why := rp.excess(s, d)
			if len(cands) == 0 || !slices.ContainsFunc(cands, func(m int) bool {
				nd := d.clone()
				nd.without(m)
				nd.say(m, why(m))
				nd.class = min(nd.class, classCount)
				return rp.commit(s, nd)
			}) {
				break
			}
		}
	}
}

// excess returns the members of d that shrink may remove, worst first, and
// the reason for removing each.
func (rp *replicaPlanner) excess(s int, d *dset) ([]int, func(int) string) {
	var cands []int
	var why func(int) string
	if rp.veto {
		for _, m := range d.members {
			if m != d.primary && rp.holdsZone(d, rp.zone[m], m) && rp.rank(s, m) >= rp.worstOther(s, d, m) {
				cands = append(cands, m)
			}
		}
		why = func(m int) string { return fmt.Sprintf("zone %s holds two replicas of the slot", rp.zoneName(m)) }
	}
	if len(cands) == 0 {
		live := rp.live(d)
		for _, m := range d.members {
			if m != d.primary && (len(d.members) > rp.in.RF || (live > rp.need && !rp.down[m])) {
				cands = append(cands, m)
			}
		}
		n := len(d.members)
		why = func(m int) string {
			if n > rp.in.RF {
				return fmt.Sprintf("rf %d: the slot has %d replicas; %s", rp.in.RF, n, rp.standing(m))
			}
			return fmt.Sprintf("%d zones have an active node: the slot keeps %d live replicas; %s", rp.azones, rp.need, rp.standing(m))
		}
	}
	slices.SortStableFunc(cands, func(a, b int) int {
		if c := cmp.Compare(rp.rank(s, b), rp.rank(s, a)); c != 0 {
			return c
		}
		return cmp.Compare(rp.excessOf(b), rp.excessOf(a))
	})
	return cands, why
}

// excessOf is how far node i is above its target, plus its share of how far
// its zone is above the zone's: removing from it helps both.
func (rp *replicaPlanner) excessOf(i int) float64 {
	z := rp.zone[i]
	return float64(rp.count[i]-rp.target[i]) + float64(rp.zcount[z]-rp.ztarget[z])/float64(max(1, rp.zactive[z]))
}

// rank orders members for removal: down 3, draining 2, a learner 1, else 0.
func (rp *replicaPlanner) rank(s, m int) int {
	switch {
	case rp.down[m]:
		return 3
	case rp.nodes[m].State == StateDraining:
		return 2
	case slices.Contains(rp.cur[s].learners, m):
		return 1
	}
	return 0
}

// worstOther is the highest removal rank among m's zone mates in d: m is a
// candidate when it is at least as bad as each (the primary always stays).
func (rp *replicaPlanner) worstOther(s int, d *dset, m int) int {
	r := -1
	for _, o := range d.members {
		if o != m && rp.zone[o] == rp.zone[m] && o != d.primary {
			r = max(r, rp.rank(s, o))
		}
	}
	return r
}

// replace moves every replica off draining and down nodes: to an active node
// of the same zone or of a zone the slot does not hold, the emptiest zone
// against its target first. A replica with nowhere to go stays.
func (rp *replicaPlanner) replace() {
	for s := range rp.want {
		if rp.fixed[s] {
			continue
		}
		for _, m := range slices.Clone(rp.want[s].members) {
			if rp.active[m] {
				continue
			}
			d := &rp.want[s]
			for _, z := range rp.zoneOrder(d, m) {
				y := rp.bestIn(z, d)
				nd := d.clone()
				nd.without(m)
				nd.with(y)
				nd.class = classDrain
				nd.say(m, fmt.Sprintf("%s; %s replaces it", rp.standing(m), rp.id(y)))
				nd.say(y, fmt.Sprintf("replaces %s, which is %s; %s", rp.id(m), rp.nodes[m].State, rp.standing(y)))
				if rp.commit(s, nd) {
					break
				}
			}
		}
	}
}

// grow adds replicas to slots with fewer live ones than they need, each in
// a zone the slot does not hold, the emptiest zone against its target first.
func (rp *replicaPlanner) grow() {
	for s := range rp.want {
		if rp.fixed[s] {
			continue
		}
		for rp.live(&rp.want[s]) < rp.need {
			d := &rp.want[s]
			if !slices.ContainsFunc(rp.zoneOrder(d, -1), func(z int) bool {
				y := rp.bestIn(z, d)
				nd := d.clone()
				nd.with(y)
				nd.class = min(nd.class, classCount)
				nd.say(y, fmt.Sprintf("rf %d, live replicas %d, none in zone %s; %s", rp.in.RF, rp.live(d), rp.zoneName(y), rp.standing(y)))
				return rp.commit(s, nd)
			}) {
				break
			}
		}
	}
}

// balanceZones moves replicas from zones above their target to zones below
// it, from the zone's node furthest above its own target to the other
// zone's node furthest below, each time the slot a donor gives cheapest
// that does not hold the receiving zone.
func (rp *replicaPlanner) balanceZones() {
	failed := map[[2]int]bool{} // donor and zone with no slot to give it: not tried again
	for {
		var over, under []int
		for z := range rp.zones {
			switch d := rp.zcount[z] - rp.ztarget[z]; {
			case d > 0:
				over = append(over, z)
			case d < 0:
				under = append(under, z)
			}
		}
		byGap := func(a, b int) int {
			return cmp.Compare(abs(rp.zcount[b]-rp.ztarget[b]), abs(rp.zcount[a]-rp.ztarget[a]))
		}
		slices.SortStableFunc(over, byGap)
		slices.SortStableFunc(under, byGap)
		moved := false
	pairs:
		for _, zu := range under {
			y := rp.bestIn(zu, &dset{})
			for _, zo := range over {
				for _, x := range rp.donors(zo) {
					if failed[[2]int{x, zu}] || !outside(rp.zcount[zo], rp.ztarget[zo]) && !outside(rp.zcount[zu], rp.ztarget[zu]) &&
						!outside(rp.count[x], rp.target[x]) && !outside(rp.count[y], rp.target[y]) {
						continue
					}
					for rp.zcount[zo] > rp.ztarget[zo] && rp.zcount[zu] < rp.ztarget[zu] &&
						rp.count[x] > rp.target[x] && rp.count[y] < rp.target[y] && rp.move(x, y, func() (string, string) {
						return fmt.Sprintf("zone %s holds %d replicas, target %d; %s", rp.zoneName(x), rp.zcount[zo], rp.ztarget[zo], rp.standing(x)),
							fmt.Sprintf("zone %s holds %d replicas, target %d; %s", rp.zoneName(y), rp.zcount[zu], rp.ztarget[zu], rp.standing(y))
					}) {
						moved = true
					}
					if moved {
						break pairs
					}
					failed[[2]int{x, zu}] = true
				}
			}
		}
		if !moved {
			return
		}
	}
}

// balanceNodes moves replicas, inside each zone, from nodes above their
// target to nodes below it: a replica replaced in its own zone keeps the
// zone rule whatever the slot holds.
func (rp *replicaPlanner) balanceNodes() {
	failed := map[[2]int]bool{} // donor and recipient with no slot to move: not tried again
	for z := range rp.zones {
		for {
			var recipients []int
			for _, i := range rp.zoneNodes[z] {
				if rp.active[i] && rp.count[i] < rp.target[i] {
					recipients = append(recipients, i)
				}
			}
			slices.SortStableFunc(recipients, func(a, b int) int {
				return cmp.Compare(rp.count[a]-rp.target[a], rp.count[b]-rp.target[b])
			})
			moved := false
		pairs:
			for _, y := range recipients {
				for _, x := range rp.donors(z) {
					if failed[[2]int{x, y}] || !outside(rp.count[x], rp.target[x]) && !outside(rp.count[y], rp.target[y]) {
						continue
					}
					for rp.count[x] > rp.target[x] && rp.count[y] < rp.target[y] && rp.move(x, y, func() (string, string) {
						return rp.standing(x), rp.standing(y)
					}) {
						moved = true
					}
					if moved {
						break pairs
					}
					failed[[2]int{x, y}] = true
				}
			}
			if !moved {
				break
			}
		}
	}
}

// donors returns zone z's active nodes above their replica target, furthest
// above first.
func (rp *replicaPlanner) donors(z int) []int {
	var out []int
	for _, i := range rp.zoneNodes[z] {
		if rp.active[i] && rp.count[i] > rp.target[i] {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int {
		return cmp.Compare(rp.count[b]-rp.target[b], rp.count[a]-rp.target[a])
	})
	return out
}

// move moves one of x's replicas to y: a slot whose replica on y the plan
// removes if there is one, else the first slot in x's list (not the
// primary's first, cheapest first) that y can join under the zone rule and
// whose steps exist. why gives the reasons for x and y.
func (rp *replicaPlanner) move(x, y int, why func() (string, string)) bool {
	whyX, whyY := why()
	whyX += "; " + rp.id(y) + " takes the replica"
	whyY += "; takes the replica of " + rp.id(x)
	// A slot whose replica on y the plan removes takes y back without a
	// copy: those first.
	back := rp.droppedOf[y]
	for k := 0; k < len(back); k++ {
		s := back[k]
		if rp.want[s].has(y) {
			back = slices.Delete(back, k, k+1) // y is back in its set
			k--
			continue
		}
		if rp.want[s].has(x) && rp.want[s].primary != x && rp.moveSlot(s, x, y, whyX, whyY) {
			rp.droppedOf[y] = back
			return true
		}
	}
	rp.droppedOf[y] = back
	// Then x's slots in order, from where the last search for y's zone
	// stopped: the slots before it hold that zone, or gave x's replica away.
	list := rp.slotsOf[x]
	at := [2]int{x, rp.zone[y]}
	for k := max(rp.head[x], rp.cursor[at]); k < len(list); k++ {
		s := list[k]
		if !rp.want[s].has(x) {
			if k == rp.head[x] {
				rp.head[x]++
			}
			continue
		}
		if rp.moveSlot(s, x, y, whyX, whyY) {
			rp.cursor[at] = k
			return true
		}
	}
	rp.cursor[at] = len(list)
	return false
}

// inCur reports whether node n holds a replica of slot s now.
func (rp *replicaPlanner) inCur(s, n int) bool {
	return slices.Contains(rp.cur[s].isr, n) || slices.Contains(rp.cur[s].learners, n)
}

// moveSlot moves slot s's replica from x to y if y may join under the zone
// rule and the slot's steps exist.
func (rp *replicaPlanner) moveSlot(s, x, y int, whyX, whyY string) bool {
	d := &rp.want[s]
	if rp.fixed[s] || d.has(y) || (rp.veto && rp.holdsZone(d, rp.zone[y], x)) {
		return false
	}
	nd := d.clone()
	nd.without(x)
	nd.with(y)
	nd.say(x, whyX)
	nd.say(y, whyY)
	nd.class = min(nd.class, classBalance)
	return rp.commit(s, nd)
}

func abs(x int) int { return max(x, -x) }

// outside reports whether count is outside the dead band around target: a
// node or zone within 1% of its target (at least one replica) is balanced,
// so the rounding a fresh bootstrap leaves costs no copy.
func outside(count, target int) bool { return abs(count-target) > max(1, target/100) }
