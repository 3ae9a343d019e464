package planner

// Replica targets: zones first, then the nodes of each zone, then primaries.

import (
	"cmp"
	"slices"

	"github.com/slotd/slotd/slots"
)

// apportion shares total among items in proportion to weight, none above
// its cap (cap < 0: no cap), by largest remainder: an item whose share
// exceeds its cap gets the cap and the others share the rest (water-filling).
// Ties in the remainder go to the item holding more now (fewer moves), then
// to the lower index. Items of weight 0 get 0. When the caps hold less than
// total, every item gets its cap.
func apportion(total int, weight []int64, caps, current []int) []int {
	out := make([]int, len(weight))
	capped := make([]bool, len(weight))
	left := int64(total)
	for {
		var w int64
		for i, x := range weight {
			if !capped[i] {
				w += x
			}
		}
		if w == 0 {
			return out
		}
		again := false
		for i, x := range weight {
			if !capped[i] && x > 0 && caps[i] >= 0 && left*x > int64(caps[i])*w {
				capped[i], out[i] = true, caps[i]
				left -= int64(caps[i])
				again = true
			}
		}
		if again {
			continue
		}
		type rem struct {
			i int
			r int64
		}
		var rems []rem
		given := int64(0)
		for i, x := range weight {
			if capped[i] || x == 0 {
				continue
			}
			out[i] = int(left * x / w)
			given += int64(out[i])
			rems = append(rems, rem{i, left * x % w})
		}
		slices.SortStableFunc(rems, func(a, b rem) int {
			if c := cmp.Compare(b.r, a.r); c != 0 {
				return c
			}
			return cmp.Compare(current[b.i], current[a.i])
		})
		for k := 0; given < left && k < len(rems); k++ {
			if caps[rems[k].i] < 0 || out[rems[k].i] < caps[rems[k].i] {
				out[rems[k].i]++
				given++
			}
		}
		return out
	}
}

// targets sets the replica targets of zones and nodes and the primary
// targets of nodes. The replicas to place are each movable slot's need plus
// the fixed slots' replicas on active nodes. A zone holds at most one
// replica of a slot, so a zone's share by the weight of its active nodes is
// capped at the number of slots, and the other zones share the rest (a zone
// of one node among three at rf 3 holds a replica of every slot, whatever
// its weight). Each zone's target is shared among its active nodes by
// weight. Primaries, one per slot, are shared by weight over every active
// node, none above its replica target. Nodes not active target zero.
func (rp *replicaPlanner) targets() {
	total := 0
	for s := range rp.want {
		if rp.fixed[s] {
			for _, m := range rp.want[s].members {
				if rp.active[m] {
					total++
				}
			}
			continue
		}
		total += rp.need
	}
	zw := make([]int64, len(rp.zones))
	zcaps := make([]int, len(rp.zones))
	for z := range zcaps {
		zcaps[z] = slots.Count
	}
	for i, n := range rp.nodes {
		if rp.active[i] {
			zw[rp.zone[i]] += int64(n.Weight)
		}
	}
	rp.ztarget = apportion(total, zw, zcaps, rp.zcount)

	rp.target = make([]int, len(rp.nodes))
	weight := make([]int64, len(rp.nodes))
	for z, members := range rp.zoneNodes {
		w := make([]int64, len(members))
		caps := make([]int, len(members))
		cur := make([]int, len(members))
		for k, i := range members {
			if rp.active[i] {
				w[k] = int64(rp.nodes[i].Weight)
			}
			caps[k], cur[k] = -1, rp.count[i]
		}
		for k, t := range apportion(rp.ztarget[z], w, caps, cur) {
			rp.target[members[k]] = t
		}
	}
	for i, n := range rp.nodes {
		if rp.active[i] {
			weight[i] = int64(n.Weight)
		}
	}
	rp.ptarget = apportion(slots.Count-rp.fixedPrimaries(), weight, rp.target, rp.prim)
}

// fixedPrimaries counts the fixed slots whose primary is not active: they
// stay where they are, outside every active node's share.
func (rp *replicaPlanner) fixedPrimaries() int {
	n := 0
	for s := range rp.want {
		if rp.fixed[s] && !rp.active[rp.want[s].primary] {
			n++
		}
	}
	return n
}
