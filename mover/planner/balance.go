package planner

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/slotd/slotd/slots"
)

// ErrNoLoad marks a load mode (bytes or ops) asked for while no node has
// reported its load: the planner refuses rather than balance zeros.
var ErrNoLoad = errors.New("planner: no load reported")

// The load dimensions a plan balances. Keys are measured and shown but not
// balanced: bytes already weigh what a key costs to hold.
const (
	dimBytes = iota
	dimOps
	nDims
)

var dimNames = [nDims]string{"bytes", "ops"}

type vec [nDims]float64

// Load is a node's load in the balanced dimensions: bytes held and
// requests per second (or the ratio of each to the node's share).
type Load struct {
	Bytes float64 `json:"bytes"`
	Ops   float64 `json:"ops"`
}

func (v vec) load() Load { return Load{Bytes: v[dimBytes], Ops: v[dimOps]} }

// HotSpot is a slot whose load alone exceeds the band of any node: moving it
// cannot fix its node, so the plan leaves it where it is, moves the node's
// other loaded slots away, and names it.
type HotSpot struct {
	Slot      int    `json:"slot"`
	Node      string `json:"node"`
	Dimension string `json:"dimension"`
	// Share is the slot's load over its node's fair share of the
	// dimension: 1.4 means the slot alone is 140% of what the node should hold.
	Share float64 `json:"share"`
	// Tag is the hash tag ("{user:42}") the slot's hot keys share, if they do.
	Tag string `json:"tag,omitempty"`
}

// Blocked lists the slots a plan may not move: their owner is down, and a
// move copies from the owner.
type Blocked struct {
	Node   string `json:"node"`
	Slots  string `json:"slots"` // range notation
	Count  int    `json:"count"`
	Reason string `json:"reason"`
}

// The tuning of the load planner. Fixed, so a plan stays a function of its
// input.
const (
	minMoveCost  = 4 << 10 // bytes: the floor of a move's fixed cost
	topDonors    = 3       // donors tried per step, hottest first
	topTakers    = 3       // recipients tried per step and dimension, coldest first
	perList      = 8       // candidate slots taken from each sorted list
	swapPerSide  = 16      // candidate slots per side of a swap
	gainEpsilon  = 1e-12   // a move must gain more than this to be made
	hotKeysToTag = 1       // hot keys in a slot needed to name its tag
)

// lnode is one node in the load model.
type lnode struct {
	id     string
	state  string
	weight float64
	member bool // active with known load: gives and takes
	known  bool
	hot    bool // keeps a hot slot alone: neither gives nor takes after isolation
	load   vec
	share  float64 // weight over the members' weight in the model being balanced
	slots  int
	bytes  int64 // sized bytes (Input.SlotBytes or reported), for the preview
}

// balancer holds one load plan's working state.
type balancer struct {
	in      Input
	tol     float64
	aim     float64 // half the band: where a plan, once needed, aims
	dims    []int   // balanced dimensions: every move is checked in each
	gain    []int   // dimensions whose imbalance the current phase reduces
	nodes   []lnode
	owner   []int   // node index of every slot, as moves are planned
	sl      []vec   // load of every slot
	cost    []int64 // bytes one move of the slot copies
	fixed   []bool  // slot may not move (busy, down owner, unknown owner, hot)
	moved   []bool  // slot moved once in this plan: it does not move again
	total   vec     // load the members share
	weight  float64 // the members' weight
	perMove float64 // fixed cost of one move, in bytes
	plan    *Plan
	spent   int64
	budget  bool // stopped by the budget
}

func (b *balancer) ratio(i, d int) float64 {
	n := &b.nodes[i]
	if b.total[d] <= 0 || n.share <= 0 {
		return 0
	}
	return n.load[d] / (n.share * b.total[d])
}

// penalty is the squared distance of a ratio outside the aim (half the
// band): a plan is made when a node leaves the band and then aims at half
// of it, so the next report does not find it at the edge again.
func (b *balancer) penalty(r float64) float64 {
	x := math.Abs(r-1) - b.aim
	if x <= 0 {
		return 0
	}
	return x * x
}

// inBand reports whether node i is within band of its share in every
// dimension of dims.
func (b *balancer) inBand(i int, dims []int, band float64) bool {
	for _, d := range dims {
		if b.total[d] <= 0 {
			continue
		}
		if r := b.ratio(i, d); r > 1+band+1e-9 || r < 1-band-1e-9 {
			return false
		}
	}
	return true
}

// heat is the node's largest ratio over the balanced dimensions.
func (b *balancer) heat(i int) float64 {
	h := 0.0
	for _, d := range b.dims {
		h = max(h, b.ratio(i, d))
	}
	return h
}

func (b *balancer) pool() []int {
	var out []int
	for i := range b.nodes {
		if b.nodes[i].member && !b.nodes[i].hot {
			out = append(out, i)
		}
	}
	return out
}

// balanced reports whether every member outside hot spots is within band
// in each of dims.
func (b *balancer) balanced(dims []int, band float64) bool {
	for _, i := range b.pool() {
		if !b.inBand(i, dims, band) {
			return false
		}
	}
	return true
}

// computeLoad plans by measured load. nodes are in id order.
func computeLoad(in Input, nodes []Node, index map[string]int, mode BalanceBy) (*Plan, error) {
	b, err := newBalancer(in, nodes, index, mode)
	if err != nil {
		return nil, err
	}
	before := make([]lnode, len(b.nodes))
	copy(before, b.nodes)
	beforeTotal := b.total

	b.drain()
	hot := b.isolate()
	if len(b.plan.Moves) == 0 && b.balanced(b.dims, b.tol) && !hot {
		b.plan.Note = fmt.Sprintf("balanced within %s: nothing to do", pct(b.tol))
		b.plan.Balanced = true
	} else {
		if len(b.dims) > 1 {
			// auto: bytes first (what costs to move), every move checked
			// in ops too; then both.
			b.greedy([]int{dimBytes})
		}
		b.greedy(b.dims)
		switch {
		case b.balanced(b.dims, b.tol):
			b.plan.Note = fmt.Sprintf("balanced within %s", pct(b.tol))
		case b.budget:
			b.plan.Note = "stopped at the budget"
		default:
			b.plan.Note = "stopped: no move improves the balance"
		}
	}
	b.finish(before, beforeTotal)
	b.plan.Balanced = b.plan.Balanced && len(b.plan.Blocked) == 0
	return b.plan, nil
}

// newBalancer builds the load model of in: nodes (in id order) with their
// loads, shares and ratios, the slots' loads and move costs.
func newBalancer(in Input, nodes []Node, index map[string]int, mode BalanceBy) (*balancer, error) {
	b := &balancer{in: in, tol: in.Tolerance}
	if b.tol == 0 {
		b.tol = DefaultTolerance
	}
	b.aim = b.tol / 2
	switch mode {
	case BalanceBytes:
		b.dims = []int{dimBytes}
	case BalanceOps:
		b.dims = []int{dimOps}
	default:
		b.dims = []int{dimBytes, dimOps}
	}
	b.plan = &Plan{BaseVersion: in.Version, BalanceBy: mode, Tolerance: b.tol}
	b.nodes = make([]lnode, len(nodes))
	b.owner = make([]int, slots.Count)
	b.sl = make([]vec, slots.Count)
	b.cost = make([]int64, slots.Count)
	b.fixed = make([]bool, slots.Count)
	b.moved = make([]bool, slots.Count)
	for s, id := range in.Owners {
		i := index[id]
		b.owner[s] = i
		b.nodes[i].slots++
	}
	for i, n := range nodes {
		ln := &b.nodes[i]
		ln.id, ln.state, ln.weight = n.ID, n.State, float64(n.Weight)
		_, reported := in.Loads[n.ID]
		// A node owning nothing has nothing to be unknown about.
		ln.known = n.State != StateDown && (reported || ln.slots == 0)
		ln.member = ln.known && n.State == StateActive
	}
	// Slot loads from their owners' reports; slots a report lists but the
	// node does not own (a report older than the table) are ignored.
	for i, n := range nodes {
		rep, ok := in.Loads[n.ID]
		if !ok || !b.nodes[i].known {
			continue
		}
		for _, l := range rep.Slots {
			if s := int(l.Slot); b.owner[s] == i {
				b.sl[s] = vec{l.Bytes, l.Reads + l.Writes}
			}
		}
	}
	// A draining node that has not reported must still empty: its slots are
	// estimated at the mean load of a known node's slot.
	var knownSum vec
	knownSlots := 0
	for s := range b.sl {
		if b.nodes[b.owner[s]].known {
			for d := range nDims {
				knownSum[d] += b.sl[s][d]
			}
			knownSlots++
		}
	}
	for s := range b.sl {
		n := &b.nodes[b.owner[s]]
		if !n.known && n.state == StateDraining && knownSlots > 0 {
			for d := range nDims {
				b.sl[s][d] = knownSum[d] / float64(knownSlots)
			}
			if in.SlotBytes != nil {
				b.sl[s][dimBytes] = float64(in.SlotBytes[s])
			}
		}
	}
	var sized int64
	for s := range b.cost {
		if in.SlotBytes != nil {
			b.cost[s] = in.SlotBytes[s]
		} else {
			b.cost[s] = int64(math.Round(b.sl[s][dimBytes]))
		}
		sized += b.cost[s]
		n := &b.nodes[b.owner[s]]
		n.bytes += b.cost[s]
		for d := range nDims {
			n.load[d] += b.sl[s][d]
		}
		busy := in.Busy != nil && in.Busy.Contains(slots.MustNew(s))
		b.fixed[s] = busy || n.state == StateDown || (n.state == StateActive && !n.known)
	}
	b.perMove = max(minMoveCost, float64(sized)/slots.Count)

	for i := range b.nodes {
		n := &b.nodes[i]
		if n.member {
			b.weight += n.weight
		}
		if n.member || n.state == StateDraining {
			for d := range nDims {
				b.total[d] += n.load[d]
			}
		}
		if !n.known && n.state != StateDown {
			b.plan.Unknown = append(b.plan.Unknown, n.id)
		}
	}
	b.blocked()
	if b.weight == 0 {
		return nil, fmt.Errorf("%w: no active node has reported its load (unknown: %s); plan with --balance-by slots", ErrNoLoad, strings.Join(b.plan.Unknown, ", "))
	}
	for i := range b.nodes {
		if b.nodes[i].member {
			b.nodes[i].share = b.nodes[i].weight / b.weight
		}
	}
	return b, nil
}

func pct(f float64) string { return fmt.Sprintf("%g%%", math.Round(f*1000)/10) }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// blocked names the slots of down nodes: they stay.
func (b *balancer) blocked() {
	for i, n := range b.nodes {
		if n.state != StateDown || n.slots == 0 {
			continue
		}
		var set slots.Set
		for s, o := range b.owner {
			if o == i {
				set.Add(slots.MustNew(s))
			}
		}
		b.plan.Blocked = append(b.plan.Blocked, Blocked{Node: n.id, Slots: set.String(), Count: n.slots,
			Reason: fmt.Sprintf("%s is down: a move copies from the owner, so its slots stay until it returns", n.id)})
	}
}

// move records one move and updates the model.
func (b *balancer) move(s, to int, reason string) {
	from := b.owner[s]
	b.plan.Moves = append(b.plan.Moves, Move{Slot: s, From: b.nodes[from].id, To: b.nodes[to].id, Bytes: b.cost[s], Reason: reason})
	b.plan.TotalBytes += b.cost[s]
	b.spent += b.cost[s]
	for d := range nDims {
		b.nodes[from].load[d] -= b.sl[s][d]
		b.nodes[to].load[d] += b.sl[s][d]
	}
	b.nodes[from].slots--
	b.nodes[to].slots++
	b.nodes[from].bytes -= b.cost[s]
	b.nodes[to].bytes += b.cost[s]
	b.owner[s] = to
	b.moved[s] = true
}

// normalized is the slot's load as a fraction of the total, summed over the
// balanced dimensions: the size of a slot for ordering.
func (b *balancer) normalized(s int) float64 {
	x := 0.0
	for _, d := range b.dims {
		if b.total[d] > 0 {
			x += b.sl[s][d] / b.total[d]
		}
	}
	return x
}

func (b *balancer) ratios(i int) string {
	var parts []string
	for _, d := range b.dims {
		parts = append(parts, fmt.Sprintf("%s %.2fx", dimNames[d], b.ratio(i, d)))
	}
	return strings.Join(parts, ", ")
}

// place moves each of the given slots, heaviest first, to the member where
// it adds the least imbalance at the time, among the coldest few in each
// balanced dimension (ties: the lower heat, then the lower index).
func (b *balancer) place(ss []int, why func(s int) string) {
	slices.SortFunc(ss, func(x, y int) int {
		if c := cmp.Compare(b.normalized(y), b.normalized(x)); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	pool := b.pool()
	if len(pool) == 0 {
		return
	}
	rat := make([]vec, len(b.nodes))
	var colds [nDims]*ranking
	for _, d := range b.dims {
		colds[d] = &ranking{less: func(x, y int) bool { return rat[x][d] < rat[y][d] || (rat[x][d] == rat[y][d] && x < y) }}
	}
	for _, i := range pool {
		for _, d := range b.dims {
			rat[i][d] = b.ratio(i, d)
			colds[d].insert(i)
		}
	}
	for _, s := range ss {
		if b.overBudget(s) {
			b.budget = true
			return
		}
		to, best, bestHeat := -1, 0.0, 0.0
		for _, d := range b.dims {
			for _, t := range colds[d].idx[:min(topTakers, len(colds[d].idx))] {
				cost := 0.0
				for _, k := range b.dims {
					if b.total[k] > 0 {
						r := rat[t][k]
						cost += b.penalty(r+b.sl[s][k]/(b.nodes[t].share*b.total[k])) - b.penalty(r)
					}
				}
				h := b.heat(t)
				if to < 0 || cost < best || (cost == best && (h < bestHeat || (h == bestHeat && t < to))) {
					to, best, bestHeat = t, cost, h
				}
			}
		}
		b.move(s, to, fmt.Sprintf("%s; %s has room (%s of its share)", why(s), b.nodes[to].id, b.ratios(to)))
		for _, d := range b.dims {
			colds[d].remove(to)
			rat[to][d] = b.ratio(to, d)
			colds[d].insert(to)
		}
	}
}

func (b *balancer) overBudget(s int) bool {
	if b.in.MaxMoves > 0 && len(b.plan.Moves) >= b.in.MaxMoves {
		return true
	}
	return b.in.MaxBytes > 0 && b.spent+b.cost[s] > b.in.MaxBytes
}

// drain moves every movable slot of the draining nodes, within the budget.
func (b *balancer) drain() {
	var ss []int
	for s, o := range b.owner {
		if b.nodes[o].state == StateDraining && !b.fixed[s] {
			ss = append(ss, s)
		}
	}
	b.place(ss, func(s int) string { return b.nodes[b.owner[s]].id + " is draining" })
}
