package planner

// Slot targets by weight, and the donor and recipient queues that spread a count plan's moves.

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/slotd/slotd/slots"
)

// Targets returns each node's slot target (see targets) for nodes holding
// current slots now. Nodes are taken in id order for ties, whatever their
// order here.
func Targets(nodes []Node, current []int) []int {
	out := make([]int, len(nodes))
	if !slices.ContainsFunc(nodes, func(n Node) bool { return n.State == StateActive && n.Weight > 0 }) {
		return out // no active weight: nothing is anyone's share
	}
	order := make([]int, len(nodes))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(nodes[a].ID, nodes[b].ID) })
	sorted := make([]Node, len(nodes))
	cur := make([]int, len(nodes))
	for k, i := range order {
		sorted[k], cur[k] = nodes[i], current[i]
	}
	t, err := targets(sorted, cur)
	if err != nil {
		return out
	}
	for k, i := range order {
		out[i] = t[k]
	}
	return out
}

// blockedSlots lists the slots of down nodes, which no move may take.
func blockedSlots(in Input, nodes []Node, index map[string]int) []Blocked {
	var out []Blocked
	sets := map[int]*slots.Set{}
	for s, o := range in.Owners {
		i := index[o]
		if nodes[i].State != StateDown {
			continue
		}
		if sets[i] == nil {
			sets[i] = &slots.Set{}
		}
		sets[i].Add(slots.MustNew(s))
	}
	for i, n := range nodes {
		if set := sets[i]; set != nil {
			out = append(out, Blocked{Node: n.ID, Slots: set.String(), Count: set.Count(),
				Reason: fmt.Sprintf("%s is down: a move copies from the owner, so its slots stay until it returns", n.ID)})
		}
	}
	return out
}

// targets returns each node's slot target: weight-proportional over active
// nodes, by largest remainder. Ties in the remainder go to the node holding
// more slots now (fewer moves), then to the smaller id (nodes must be in
// id order). A down node keeps what it holds (no move may copy from it);
// the active nodes share the rest.
func targets(nodes []Node, current []int) ([]int, error) {
	var total int64
	count := slots.Count
	target := make([]int, len(nodes))
	for i, n := range nodes {
		switch n.State {
		case StateActive:
			total += int64(n.Weight)
		case StateDown:
			target[i] = current[i]
			count -= current[i]
		}
	}
	type rem struct {
		i int
		r int64
	}
	var rems []rem
	given := 0
	for i, n := range nodes {
		if n.State != StateActive {
			continue
		}
		share := int64(count) * int64(n.Weight)
		target[i] = int(share / total)
		given += target[i]
		rems = append(rems, rem{i, share % total})
	}
	slices.SortStableFunc(rems, func(a, b rem) int {
		if c := cmp.Compare(b.r, a.r); c != 0 {
			return c
		}
		return cmp.Compare(current[b.i], current[a.i])
	})
	for k := 0; given < count; k++ {
		target[rems[k].i]++
		given++
	}
	return target, nil
}

func planID(p *Plan) string {
	var h xxhash.Digest
	h.Reset()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], p.BaseVersion)
	h.Write(b[:])
	for _, m := range p.Moves {
		binary.LittleEndian.PutUint64(b[:], uint64(m.Slot))
		h.Write(b[:])
		h.WriteString(m.From)
		h.Write([]byte{0})
		h.WriteString(m.To)
		h.Write([]byte{0})
	}
	return fmt.Sprintf("p-%d-%012x", p.BaseVersion, h.Sum64()>>16)
}

// task is a donor or recipient with moves left to do.
type task struct {
	node int
	left int
}

// work is a max-heap of tasks by moves left, ties to the lower node index.
type work []*task

func (w work) Len() int { return len(w) }
func (w work) Less(i, j int) bool {
	if w[i].left != w[j].left {
		return w[i].left > w[j].left
	}
	return w[i].node < w[j].node
}
func (w work) Swap(i, j int) { w[i], w[j] = w[j], w[i] }
func (w *work) Push(x any)   { *w = append(*w, x.(*task)) }
func (w *work) Pop() any {
	old := *w
	t := old[len(old)-1]
	*w = old[:len(old)-1]
	return t
}

// take pops the task with the most left, skipping avoid when another task
// exists, and charges it one move.
func (w *work) take(avoid int) *task {
	t := heap.Pop(w).(*task)
	if t.node == avoid && w.Len() > 0 {
		other := heap.Pop(w).(*task)
		heap.Push(w, t)
		t = other
	}
	t.left--
	return t
}

// putBack returns a task to the heap if it has moves left.
func (w *work) putBack(t *task) {
	if t.left > 0 {
		heap.Push(w, t)
	}
}
