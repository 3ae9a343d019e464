package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
)

// lists holds, for one node, the slots it may give, sorted three ways: by
// each dimension's load and by load per byte copied, heaviest first. The
// lists never change during a plan; slots given away are skipped.
type lists struct {
	byDim   [nDims][]int
	density []int
	light   []int // auto: bytes-heavy, ops-light first
}

// candidate is one move (or a swap when other >= 0) and its score.
type candidate struct {
	s, from, to int
	other       int // the recipient's slot given back in a swap, or -1
	gain, score float64
}

func (c candidate) better(o candidate) bool {
	if c.score != o.score {
		return c.score > o.score
	}
	if c.s != o.s {
		return c.s < o.s
	}
	if c.to != o.to {
		return c.to < o.to
	}
	return c.other < o.other
}

// greedy makes, one at a time, the move of the best imbalance reduction per
// byte copied (a fixed per-move cost added), until the members are inside
// the band, the budget is spent, or no move or swap reduces the imbalance.
//
// The imbalance is the sum over members and balanced dimensions of the
// squared distance of each ratio outside the band. A move is allowed only
// when the recipient ends, in every balanced dimension, at or below the
// larger of the band's upper edge and the donor's new ratio: no move makes
// the most loaded node worse, and none turns a donor into the new hot spot.
func (b *balancer) greedy(gain []int) {
	b.gain = gain
	pool := b.pool()
	if len(pool) < 2 {
		return
	}
	ls := make(map[int]*lists, len(pool))
	for _, i := range pool {
		ls[i] = &lists{}
	}
	for s, o := range b.owner {
		if l := ls[o]; l != nil && !b.fixed[s] && !b.moved[s] && b.normalized(s) > 0 {
			for _, d := range b.dims {
				l.byDim[d] = append(l.byDim[d], s)
			}
			l.density = append(l.density, s)
			if len(b.dims) > 1 {
				l.light = append(l.light, s)
			}
		}
	}
	for _, l := range ls {
		for _, d := range b.dims {
			slices.SortFunc(l.byDim[d], func(x, y int) int {
				if c := cmp.Compare(b.sl[y][d], b.sl[x][d]); c != 0 {
					return c
				}
				return cmp.Compare(x, y)
			})
		}
		slices.SortFunc(l.density, func(x, y int) int {
			if c := cmp.Compare(b.density(y), b.density(x)); c != 0 {
				return c
			}
			return cmp.Compare(x, y)
		})
		slices.SortFunc(l.light, func(x, y int) int {
			if c := cmp.Compare(b.lightness(y), b.lightness(x)); c != 0 {
				return c
			}
			return cmp.Compare(x, y)
		})
	}
	// Rankings of the pool kept sorted as moves change two nodes at a time:
	// live donors by heat (hottest first) and, per balanced dimension, every
	// member by ratio (coldest first). A donor found with no move to give is
	// dead, out of the ranking, until its own load changes: the coldest
	// nodes only warm up as a plan goes on, so a donor that could not give
	// to them rarely can later.
	heat := make([]float64, len(b.nodes))
	rat := make([]vec, len(b.nodes))
	outside := 0 // pool nodes outside the aim in the phase's dimensions
	out := make([]bool, len(b.nodes))
	refresh := func(i int) {
		heat[i] = b.heat(i)
		for _, d := range b.dims {
			rat[i][d] = b.ratio(i, d)
		}
		o := !b.inBand(i, b.gain, b.aim)
		if o != out[i] {
			if o {
				outside++
			} else {
				outside--
			}
			out[i] = o
		}
	}
	for _, i := range pool {
		refresh(i)
	}
	donors := &ranking{less: func(x, y int) bool { return heat[x] > heat[y] || (heat[x] == heat[y] && x < y) }}
	var colds [nDims]*ranking
	for _, d := range b.dims {
		colds[d] = &ranking{less: func(x, y int) bool { return rat[x][d] < rat[y][d] || (rat[x][d] == rat[y][d] && x < y) }}
	}
	dead := make([]bool, len(b.nodes))
	for _, i := range pool {
		donors.insert(i)
		for _, d := range b.dims {
			colds[d].insert(i)
		}
	}
	for outside > 0 {
		if b.in.MaxMoves > 0 && len(b.plan.Moves) >= b.in.MaxMoves {
			b.budget = true
			return
		}
		var takers []int
		for _, d := range b.dims {
			for _, i := range colds[d].idx[:min(topTakers, len(colds[d].idx))] {
				if !slices.Contains(takers, i) {
					takers = append(takers, i)
				}
			}
		}
		best := candidate{s: -1}
		for best.s < 0 && len(donors.idx) > 0 {
			top := slices.Clone(donors.idx[:min(topDonors, len(donors.idx))])
			for _, d := range top {
				found := false
				for _, t := range takers {
					if c := b.bestMove(d, t, ls[d]); c.s >= 0 {
						found = true
						if best.s < 0 || c.better(best) {
							best = c
						}
					}
				}
				if !found {
					dead[d] = true
					donors.remove(d)
				}
			}
		}
		if best.s < 0 && (b.in.MaxMoves == 0 || len(b.plan.Moves)+2 <= b.in.MaxMoves) {
			var top []int
			for _, i := range pool {
				top = insertTop(top, i, topDonors, donors.less)
			}
			for _, d := range top {
				for _, t := range takers {
					if c := b.bestSwap(d, t, ls[d], ls[t]); c.s >= 0 && (best.s < 0 || c.better(best)) {
						best = c
					}
				}
			}
		}
		if best.s < 0 {
			return
		}
		b.apply(best)
		for _, i := range []int{best.from, best.to} {
			if !dead[i] {
				donors.remove(i)
			}
			for _, d := range b.dims {
				colds[d].remove(i)
			}
			refresh(i)
			dead[i] = false
			donors.insert(i)
			for _, d := range b.dims {
				colds[d].insert(i)
			}
		}
	}
}

// ranking is a set of node indexes kept sorted by less.
type ranking struct {
	idx  []int
	less func(x, y int) bool
}

func (r *ranking) insert(i int) {
	pos := sort.Search(len(r.idx), func(j int) bool { return r.less(i, r.idx[j]) })
	r.idx = slices.Insert(r.idx, pos, i)
}

func (r *ranking) remove(i int) {
	if j := slices.Index(r.idx, i); j >= 0 {
		r.idx = slices.Delete(r.idx, j, j+1)
	}
}

func (b *balancer) density(s int) float64 {
	return b.normalized(s) / (float64(b.cost[s]) + b.perMove)
}

// lightness is a slot's share of the bytes over its share of the ops.
func (b *balancer) lightness(s int) float64 {
	if b.total[dimBytes] <= 0 || b.total[dimOps] <= 0 {
		return 0
	}
	return (b.sl[s][dimBytes] / b.total[dimBytes]) / (b.sl[s][dimOps]/b.total[dimOps] + 1e-9)
}

// insertTop keeps top sorted by first, at most k long, with x inserted.
func insertTop(top []int, x, k int, first func(a, b int) bool) []int {
	pos := sort.Search(len(top), func(j int) bool { return first(x, top[j]) })
	if pos >= k {
		return top
	}
	top = slices.Insert(top, pos, x)
	if len(top) > k {
		top = top[:k]
	}
	return top
}

// gives reports whether slot s is still donor i's to give.
func (b *balancer) gives(s, i int) bool { return b.owner[s] == i && !b.moved[s] }

// evaluate scores moving load x (per dimension) from donor d to taker t at
// cost bytes; ok is false when the move is not allowed or gains nothing.
func (b *balancer) evaluate(x vec, d, t int, cost float64) (gain, score float64, ok bool) {
	// With more than one dimension, a move may not spread the recipient's
	// ratios further apart than the aim (unless they were already): a
	// slot moves at most once a plan, so a node filled first with big,
	// quiet slots (or with small, busy ones) would have no room left in
	// one dimension for what it still needs in the other, and could never
	// give them back.
	if spread, spread2 := b.spread(t, vec{}), b.spread(t, x); spread2 > max(spread, b.aim)+1e-12 {
		return 0, 0, false
	}
	for _, k := range b.dims {
		if b.total[k] <= 0 {
			continue
		}
		rd, rt := b.ratio(d, k), b.ratio(t, k)
		rd2 := rd - x[k]/(b.nodes[d].share*b.total[k])
		rt2 := rt + x[k]/(b.nodes[t].share*b.total[k])
		if rt2 > max(1+b.tol, rd2)+1e-12 {
			return 0, 0, false
		}
		delta := b.penalty(rd) + b.penalty(rt) - b.penalty(rd2) - b.penalty(rt2)
		if !slices.Contains(b.gain, k) {
			delta = min(0, delta) // a dimension not balanced yet may not get worse for free
		}
		gain += delta
	}
	if gain <= gainEpsilon {
		return 0, 0, false
	}
	return gain, gain / cost, true
}

// spread is how far apart node t's ratios in the balanced dimensions (with
// any load) would be with load x added: 0 with one dimension.
func (b *balancer) spread(t int, x vec) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, k := range b.dims {
		if b.total[k] <= 0 {
			continue
		}
		r := b.ratio(t, k) + x[k]/(b.nodes[t].share*b.total[k])
		lo, hi = min(lo, r), max(hi, r)
	}
	if hi < lo {
		return 0
	}
	return hi - lo
}

func (b *balancer) fits(bytes int64) bool {
	if b.in.MaxBytes > 0 && b.spent+bytes > b.in.MaxBytes {
		b.budget = true
		return false
	}
	return true
}

// bestMove returns the best single move from d to t among a few candidates
// from each of d's lists: the heaviest slots that fit under the recipient's
// cap in each dimension, and the densest.
func (b *balancer) bestMove(d, t int, l *lists) candidate {
	best := candidate{s: -1}
	try := func(s int) {
		if !b.gives(s, d) || !b.fits(b.cost[s]) {
			return
		}
		gain, score, ok := b.evaluate(b.sl[s], d, t, float64(b.cost[s])+b.perMove)
		if !ok {
			return
		}
		c := candidate{s: s, from: d, to: t, other: -1, gain: gain, score: score}
		if best.s < 0 || c.better(best) {
			best = c
		}
	}
	for _, k := range b.dims {
		if b.total[k] <= 0 {
			continue
		}
		room := (max(1+b.tol, b.ratio(d, k)) - b.ratio(t, k)) * b.nodes[t].share * b.total[k]
		list := l.byDim[k]
		from := sort.Search(len(list), func(j int) bool { return b.sl[list[j]][k] <= room })
		b.walk(list, from, d, perList, try)
	}
	b.walk(l.density, 0, d, perList, try)
	b.walk(l.light, 0, d, perList, try)
	b.walkBack(l.light, d, perList, try) // ops-heavy, bytes-light first
	return best
}

// walkBack calls try on up to n slots of list from its end that d still
// gives.
func (b *balancer) walkBack(list []int, d, n int, try func(int)) {
	for i := len(list) - 1; i >= 0 && n > 0; i-- {
		if b.gives(list[i], d) {
			try(list[i])
			n--
		}
	}
}

// walk calls try on up to n slots of list from index i on that d still gives.
func (b *balancer) walk(list []int, i, d, n int, try func(int)) {
	for ; i < len(list) && n > 0; i++ {
		if b.gives(list[i], d) {
			try(list[i])
			n--
		}
	}
}

// bestSwap returns the best exchange of one of d's heavy slots for a
// lighter one of t's, for when no single move helps (every slot d could
// give would overshoot t).
func (b *balancer) bestSwap(d, t int, ld, lt *lists) candidate {
	best := candidate{s: -1}
	for _, k := range b.dims {
		if b.total[k] <= 0 {
			continue
		}
		b.walk(ld.byDim[k], 0, d, swapPerSide, func(s int) {
			list := lt.byDim[k]
			from := sort.Search(len(list), func(j int) bool { return b.sl[list[j]][k] < b.sl[s][k] })
			b.walk(list, from, t, perList, func(u int) {
				if !b.fits(b.cost[s] + b.cost[u]) {
					return
				}
				var x vec
				for j := range nDims {
					x[j] = b.sl[s][j] - b.sl[u][j]
				}
				gain, score, ok := b.evaluate(x, d, t, float64(b.cost[s]+b.cost[u])+2*b.perMove)
				if !ok {
					return
				}
				c := candidate{s: s, from: d, to: t, other: u, gain: gain, score: score}
				if best.s < 0 || c.better(best) {
					best = c
				}
			})
		})
	}
	return best
}

// apply makes the chosen move (or both moves of a swap) with its reason.
func (b *balancer) apply(c candidate) {
	d, t := c.from, c.to
	k := b.dims[0]
	for _, j := range b.dims {
		if b.ratio(d, j) > b.ratio(d, k) {
			k = j
		}
	}
	why := fmt.Sprintf("%s %s %.2fx its share, %s %.2fx; slot holds %s, %.1f ops/s",
		b.nodes[d].id, dimNames[k], b.ratio(d, k), b.nodes[t].id, b.ratio(t, k), humanBytes(b.sl[c.s][dimBytes]), b.sl[c.s][dimOps])
	if c.other < 0 {
		b.move(c.s, t, why)
		return
	}
	u := c.other
	b.move(c.s, t, why+fmt.Sprintf("; swapped with slot %d", u))
	b.move(u, d, fmt.Sprintf("swap for slot %d: %s gives back slot %d (%s, %.1f ops/s), lighter", c.s, b.nodes[t].id, u, humanBytes(b.sl[u][dimBytes]), b.sl[u][dimOps]))
}

func humanBytes(f float64) string {
	switch {
	case f >= 1<<30:
		return fmt.Sprintf("%.1f GiB", f/(1<<30))
	case f >= 1<<20:
		return fmt.Sprintf("%.1f MiB", f/(1<<20))
	case f >= 1<<10:
		return fmt.Sprintf("%.1f KiB", f/(1<<10))
	}
	return fmt.Sprintf("%.0f B", f)
}
