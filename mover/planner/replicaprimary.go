package planner

// The replica goals on primaries: a primary for every slot whose primary
// leaves, primary counts by weight, then requests, all by transfer (a
// transfer copies nothing).

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// choosePrimaries gives a primary to each slot whose primary leaves its set:
// a member already in sync if there is one (the hand-over then comes first
// and copies nothing), the one furthest below its primary target.
func (rp *replicaPlanner) choosePrimaries() {
	for s := range rp.want {
		d := &rp.want[s]
		if rp.fixed[s] || d.primary >= 0 {
			continue
		}
		old := rp.cur[s].isr[0]
		leaves := rp.id(old) + " leaves the slot's set"
		if !rp.active[old] {
			leaves = rp.standing(old)
		}
		var cands, late []int
		for _, m := range d.members {
			switch {
			case !rp.active[m]:
			case slices.Contains(rp.cur[s].isr, m):
				cands = append(cands, m)
			default:
				late = append(late, m)
			}
		}
		byNeed := func(a, b int) int { return cmp.Compare(rp.prim[a]-rp.ptarget[a], rp.prim[b]-rp.ptarget[b]) }
		slices.SortStableFunc(cands, byNeed)
		slices.SortStableFunc(late, byNeed)
		for _, y := range slices.Concat(cands, late) {
			nd := d.clone()
			nd.primary = y
			nd.primaryWhy = fmt.Sprintf("%s: %s takes the primary (%d primaries, target %d)", leaves, rp.id(y), rp.prim[y], rp.ptarget[y])
			if rp.commit(s, nd) {
				break
			}
		}
	}
}

// primarySlots lists, for each node, the movable slots it is the wanted
// primary of, in slot order.
func (rp *replicaPlanner) primarySlots() [][]int {
	out := make([][]int, len(rp.nodes))
	for s := range rp.want {
		if p := rp.want[s].primary; !rp.fixed[s] && p >= 0 {
			out[p] = append(out[p], s)
		}
	}
	return out
}

// balancePrimaries transfers primaries from nodes above their primary
// target to a member of the same slot below its own, furthest below first.
func (rp *replicaPlanner) balancePrimaries() {
	ps := rp.primarySlots()
	var over []int
	for i := range rp.nodes {
		if rp.active[i] && rp.prim[i] > rp.ptarget[i] {
			over = append(over, i)
		}
	}
	slices.SortStableFunc(over, func(a, b int) int {
		return cmp.Compare(rp.prim[b]-rp.ptarget[b], rp.prim[a]-rp.ptarget[a])
	})
	for _, x := range over {
		for _, s := range ps[x] {
			if rp.prim[x] <= rp.ptarget[x] {
				break
			}
			d := &rp.want[s]
			// When the slot's primary leaves its set, the hand-over comes
			// first, so only a member in sync now avoids a second one.
			leaving := !d.has(rp.cur[s].isr[0])
			y := -1
			for _, m := range d.members {
				if m != x && rp.active[m] && rp.prim[m] < rp.ptarget[m] &&
					(outside(rp.prim[x], rp.ptarget[x]) || outside(rp.prim[m], rp.ptarget[m])) &&
					(!leaving || slices.Contains(rp.cur[s].isr, m)) &&
					(y < 0 || rp.prim[m]-rp.ptarget[m] < rp.prim[y]-rp.ptarget[y]) {
					y = m
				}
			}
			if y < 0 {
				continue
			}
			nd := d.clone()
			nd.primary = y
			nd.primaryWhy = fmt.Sprintf("%s holds %d primaries, target %d; %s holds %d, target %d; a transfer copies nothing",
				rp.id(x), rp.prim[x], rp.ptarget[x], rp.id(y), rp.prim[y], rp.ptarget[y])
			rp.commit(s, nd)
		}
	}
}

// slotOps reads each slot's requests from its primary's report.
func (rp *replicaPlanner) slotOps() []float64 {
	ops := make([]float64, len(rp.want))
	for _, id := range slices.Sorted(maps.Keys(rp.in.Loads)) {
		i, ok := rp.index[id]
		if !ok {
			continue
		}
		for _, sl := range rp.in.Loads[id].Slots {
			if rp.cur[sl.Slot].isr[0] == i {
				ops[sl.Slot] = sl.Ops()
			}
		}
	}
	return ops
}

// balanceOps evens out requests, which primaries serve, without changing
// any node's primary count: it swaps primaries between two nodes that each
// hold a replica of both slots, the busiest node's heavy slot for a lighter
// one, while that lowers the busier of the two below the busiest now. A slot
// whose requests alone exceed its node's band stays, and is named.
func (rp *replicaPlanner) balanceOps() {
	if len(rp.in.Loads) == 0 {
		return
	}
	rp.ops = rp.slotOps()
	tol := rp.in.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	ol := opsLoad{rp: rp, node: make([]float64, len(rp.nodes)), share: make([]float64, len(rp.nodes)), tol: tol}
	var total float64
	var weight int64
	for s := range rp.want {
		if p := rp.want[s].primary; p >= 0 {
			ol.node[p] += rp.ops[s]
			total += rp.ops[s]
		}
	}
	for i, n := range rp.nodes {
		if rp.active[i] {
			weight += int64(n.Weight)
		}
	}
	if total == 0 {
		return
	}
	for i, n := range rp.nodes {
		if rp.active[i] {
			ol.share[i] = total * float64(n.Weight) / float64(weight)
		}
	}
	ol.isolate(total, weight)
	ol.ps = rp.primarySlots()
	for _, ss := range ol.ps {
		slices.SortFunc(ss, ol.byOps)
	}
	for range len(rp.want) {
		order := slices.Clone(rp.zoneNodesActive())
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ol.ratio(b), ol.ratio(a)) })
		if !slices.ContainsFunc(order, func(x int) bool { return ol.ratio(x) > 1+tol && ol.swap(x) }) {
			break
		}
	}
}

// zoneNodesActive returns the active nodes in index order.
func (rp *replicaPlanner) zoneNodesActive() []int {
	var out []int
	for i := range rp.nodes {
		if rp.active[i] {
			out = append(out, i)
		}
	}
	return out
}

// opsLoad is the requests each node's primaries serve, and its share.
type opsLoad struct {
	rp    *replicaPlanner
	node  []float64
	share []float64
	ps    [][]int // slots each node is the wanted primary of, by requests
	tol   float64
	hot   []bool // slots whose requests alone exceed their node's band
}

func (ol *opsLoad) ratio(i int) float64 { return ol.node[i] / ol.share[i] }

// isolate finds the hot slots, whose requests alone exceed their primary's
// band: they stay where they are and are named. Each of their nodes should
// serve them plus a fair share of the rest, and every other node a fair
// share of what the hot nodes do not serve.
func (ol *opsLoad) isolate(total float64, weight int64) {
	rp := ol.rp
	hotOps := make([]float64, len(rp.nodes))
	ol.hot = make([]bool, len(rp.want))
	for s := range rp.want {
		if p := rp.want[s].primary; p >= 0 && rp.active[p] && rp.ops[s] > ol.share[p]*(1+ol.tol) {
			ol.hot[s] = true
			hotOps[p] += rp.ops[s]
			rp.hot = append(rp.hot, HotSpot{Slot: s, Node: rp.id(p), Dimension: "ops", Share: round3(rp.ops[s] / ol.share[p])})
		}
	}
	for i, h := range hotOps {
		if h > 0 {
			total -= ol.node[i]
			weight -= int64(rp.nodes[i].Weight)
		}
	}
	if len(rp.hot) == 0 || weight <= 0 {
		return
	}
	for i, n := range rp.nodes {
		if rp.active[i] {
			ol.share[i] = hotOps[i] + max(total, 0)*float64(n.Weight)/float64(weight)
		}
	}
}

// swap makes the best primary swap that lowers busy node x, and reports
// whether it found one.
func (ol *opsLoad) swap(x int) bool {
	rp := ol.rp
	heavy := ol.primaries(x, false)
	best, bs, bt, by := ol.ratio(x)-gainEpsilon, -1, -1, -1
	for _, s := range heavy {
		if ol.hot[s] {
			continue // it stays: moving it would only make another node hot
		}
		for _, y := range rp.want[s].members {
			if y == x || !rp.active[y] {
				continue
			}
			for _, t := range ol.primaries(y, true) {
				if rp.ops[t] >= rp.ops[s] || !rp.want[t].has(x) {
					continue
				}
				d := rp.ops[s] - rp.ops[t]
				if score := max((ol.node[x]-d)/ol.share[x], (ol.node[y]+d)/ol.share[y]); score < best {
					best, bs, bt, by = score, s, t, y
				}
				break // the lightest slot y can give back is the best for this pair
			}
		}
	}
	if bs < 0 {
		return false
	}
	d := rp.ops[bs] - rp.ops[bt]
	why := fmt.Sprintf("%s serves %.2fx its requests share, %s %.2fx; slot %d (%.1f ops/s) and slot %d (%.1f ops/s) swap primaries",
		rp.id(x), ol.ratio(x), rp.id(by), ol.ratio(by), bs, rp.ops[bs], bt, rp.ops[bt])
	for _, c := range [...]struct{ s, from, to int }{{bs, x, by}, {bt, by, x}} {
		nd := rp.want[c.s].clone()
		nd.primary = c.to
		nd.primaryWhy = why
		if !rp.commit(c.s, nd) {
			return false // unreachable: both are in sync by the end of the slot's steps
		}
		ol.hand(c.s, c.from, c.to)
	}
	ol.node[x] -= d
	ol.node[by] += d
	return true
}

// primaries returns up to swapPerSide of the slots node i is the wanted
// primary of, the busiest first (or the idlest first when light).
func (ol *opsLoad) primaries(i int, light bool) []int {
	ss := ol.ps[i]
	k := min(len(ss), swapPerSide)
	if light {
		return ss[:k]
	}
	top := slices.Clone(ss[len(ss)-k:])
	slices.Reverse(top)
	return top
}

// byOps orders slots by requests, then number.
func (ol *opsLoad) byOps(a, b int) int {
	if c := cmp.Compare(ol.rp.ops[a], ol.rp.ops[b]); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

// hand moves slot s from from's primaries to to's, keeping both in order.
func (ol *opsLoad) hand(s, from, to int) {
	if k, ok := slices.BinarySearchFunc(ol.ps[from], s, ol.byOps); ok {
		ol.ps[from] = slices.Delete(ol.ps[from], k, k+1)
	}
	k, _ := slices.BinarySearchFunc(ol.ps[to], s, ol.byOps)
	ol.ps[to] = slices.Insert(ol.ps[to], k, s)
}
