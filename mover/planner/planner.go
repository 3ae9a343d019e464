package planner

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/slotd/slotd/slots"
)

// Errors returned by Compute and Check.
var (
	// ErrInvalid marks input that cannot be planned: an unknown owner, a bad
	// weight, no node able to take slots.
	ErrInvalid = errors.New("planner: invalid input")
	// ErrStale marks a plan that no longer fits the directory.
	ErrStale = errors.New("planner: plan is stale")
)

// Node states, as the directory names them.
const (
	StateActive   = "active"
	StateDraining = "draining"
	StateDown     = "down"
)

// Node is one node as the planner sees it.
type Node struct {
	ID     string `json:"id"`
	Weight int    `json:"weight"`
	Zone   string `json:"zone,omitempty"`
	State  string `json:"state"`
}

// Input is everything a plan depends on.
type Input struct {
	// Version is the directory version the table was read at.
	Version uint64
	// Owners holds the owner id of every slot; len(Owners) == slots.Count.
	Owners []string
	// Nodes is the desired node set with weights and states. Every owner
	// must be in it; nodes not owning anything yet are filled.
	Nodes []Node
	// SlotBytes optionally holds the size of every slot (nil when unknown).
	SlotBytes []int64
	// Busy holds slots with a move in flight; they are neither given nor
	// counted as movable.
	Busy *slots.Set
	// Throttle is the donor byte rate, for the time estimate (0: unlimited).
	Throttle int64
	// PerMove is the fixed cost of one move, for the time estimate.
	PerMove time.Duration

	// Loads holds each node's last load report, by node id. A node missing
	// from it has unknown load: it neither gives nor takes in a load mode,
	// and the plan names it. Loads of slots a node does not own are ignored
	// (a report may be older than the table).
	Loads map[string]NodeLoad
	// BalanceBy is what the plan balances (zero value: auto).
	BalanceBy BalanceBy
	// Tolerance is the dead band: a node whose load is within Tolerance of
	// its share is balanced (0: DefaultTolerance).
	Tolerance float64
	// MaxBytes and MaxMoves are the churn budget of a load plan: it stops
	// before it would copy more than MaxBytes or make more than MaxMoves
	// moves (0: no limit), drains included: a plan cut by the budget is
	// its first moves that fit.
	MaxBytes int64
	MaxMoves int
}

// Move is one single-slot move of a plan.
type Move struct {
	Slot   int    `json:"slot"`
	From   string `json:"from"`
	To     string `json:"to"`
	Bytes  int64  `json:"bytes"`
	Reason string `json:"reason"`
}

// NodeChange is one node's slot count and bytes before and after a plan.
type NodeChange struct {
	ID          string `json:"id"`
	State       string `json:"state"`
	Weight      int    `json:"weight"`
	SlotsBefore int    `json:"slots_before"`
	SlotsAfter  int    `json:"slots_after"`
	// TargetSlots is the node's weight-proportional share over the active
	// nodes (what a balanced table gives it): 0 for a node not active.
	TargetSlots int   `json:"target_slots"`
	BytesBefore int64 `json:"bytes_before"`
	BytesAfter  int64 `json:"bytes_after"`
	// LoadKnown says whether the node's measured load is known (it reported,
	// or owns nothing). The load and ratio fields are zero when it is not.
	LoadKnown  bool `json:"load_known"`
	LoadBefore Load `json:"load_before"`
	LoadAfter  Load `json:"load_after"`
	// RatioBefore and RatioAfter are load over the node's fair share
	// (weight over the weight of the active nodes with known load) of the
	// total; 1 is exactly its share. Zero for a node that is not active.
	RatioBefore Load `json:"ratio_before"`
	RatioAfter  Load `json:"ratio_after"`
}

// Plan is an ordered list of single-slot moves computed at one directory
// version.
type Plan struct {
	ID          string        `json:"id"`
	BaseVersion uint64        `json:"base_version"`
	Moves       []Move        `json:"moves"`
	Nodes       []NodeChange  `json:"nodes"`
	TotalBytes  int64         `json:"total_bytes"`
	Estimate    time.Duration `json:"estimate_ns"`
	// BalanceBy is what the plan balanced (auto falls back to slots when no
	// node has reported load) and Tolerance its dead band.
	BalanceBy BalanceBy `json:"balance_by,omitempty"`
	Tolerance float64   `json:"tolerance,omitempty"`
	// Note says why the plan ends where it does, in words: "balanced within
	// 10%: nothing to do", "stopped at the budget", ...
	Note string `json:"note,omitempty"`
	// Unknown names the nodes whose load is unknown: they neither gave nor
	// took in a load plan.
	Unknown []string `json:"unknown,omitempty"`
	// HotSpots names the slots moving cannot fix.
	HotSpots []HotSpot `json:"hot_spots,omitempty"`
	// Blocked lists the slots no move may take: their owner is down.
	Blocked []Blocked `json:"blocked,omitempty"`
	// Balanced says there was nothing to do: every node is at its target
	// (slots) or within the band (load), with nothing blocked and no hot
	// spot. A plan without moves that is not Balanced is one the planner
	// could not fix.
	Balanced bool `json:"balanced,omitempty"`
}

// Compute returns the plan that takes in.Owners to weight-proportional
// targets over in.Nodes with the minimum number of moves.
func Compute(in Input) (*Plan, error) {
	if err := validate(in); err != nil {
		return nil, err
	}
	nodes := slices.Clone(in.Nodes)
	slices.SortFunc(nodes, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		index[n.ID] = i
	}
	mode := in.BalanceBy
	if mode == "" {
		mode = BalanceAuto
	}
	// Measured means a node that owns slots has a load: a node owning
	// nothing is known empty, which measures nothing else.
	owns := map[string]bool{}
	for _, o := range in.Owners {
		owns[o] = true
	}
	reported, empty := false, true
	for _, n := range nodes {
		l, ok := in.Loads[n.ID]
		if ok && n.State != StateDown && owns[n.ID] {
			reported = true
			for _, sl := range l.Slots {
				if in.Owners[sl.Slot] == n.ID && (sl.Bytes > 0 || sl.Ops() > 0) {
					empty = false
				}
			}
		}
	}
	if mode != BalanceSlots {
		switch {
		case reported && empty && mode == BalanceAuto:
			// Nothing measured holds data or sees traffic (a new
			// cluster): there is no load to balance, only slots.
			p, err := computeCounts(in, nodes, index, mode)
			if err == nil {
				p.Note = strings.Replace(p.Note, "no load report yet", "no data or traffic measured yet", 1)
			}
			return p, err
		case reported:
			p, err := computeLoad(in, nodes, index, mode)
			if err != nil {
				return nil, err
			}
			fillTargets(p, nodes)
			return p, nil
		case mode != BalanceAuto:
			return nil, fmt.Errorf("%w: --balance-by %s needs load reports and no node has sent one yet; wait for reports or plan with --balance-by slots", ErrNoLoad, mode)
		}
	}
	p, err := computeCounts(in, nodes, index, mode)
	if err == nil && reported {
		countLoadView(in, nodes, index, p)
	}
	return p, err
}

// fillTargets sets each node's slot target for the preview.
func fillTargets(p *Plan, nodes []Node) {
	cur := make([]int, len(nodes))
	for i := range p.Nodes {
		cur[i] = p.Nodes[i].SlotsBefore
	}
	t := Targets(nodes, cur)
	for i := range p.Nodes {
		p.Nodes[i].TargetSlots = t[i]
	}
}

// computeCounts balances slot counts (mode is slots, or auto with no load
// report). nodes are in id order.
func computeCounts(in Input, nodes []Node, index map[string]int, mode BalanceBy) (*Plan, error) {

	// Count what each node holds, and the slots each could give, cheapest first.
	current := make([]int, len(nodes))
	bytesOf := make([]int64, len(nodes))
	movable := make([][]int, len(nodes))
	for s, owner := range in.Owners {
		i := index[owner]
		current[i]++
		bytesOf[i] += slotBytes(in, s)
		if (in.Busy == nil || !in.Busy.Contains(slots.MustNew(s))) && nodes[i].State != StateDown {
			movable[i] = append(movable[i], s)
		}
	}
	target, err := targets(nodes, current)
	if err != nil {
		return nil, err
	}

	// Donors give their excess, cheapest first; recipients take their deficit.
	var donors, recipients work
	for i := range nodes {
		if d := current[i] - target[i]; d > 0 {
			slices.SortStableFunc(movable[i], func(a, b int) int { return cmp.Compare(slotBytes(in, a), slotBytes(in, b)) })
			if len(movable[i]) < d {
				return nil, fmt.Errorf("%w: node %s must give %d slots but only %d are not in a move; wait for moves in flight to end", ErrInvalid, nodes[i].ID, d, len(movable[i]))
			}
			donors = append(donors, &task{node: i, left: d})
		} else if d < 0 {
			recipients = append(recipients, &task{node: i, left: -d})
		}
	}
	heap.Init(&donors)
	heap.Init(&recipients)

	p := &Plan{BaseVersion: in.Version, BalanceBy: BalanceSlots}
	if mode != BalanceSlots {
		p.Note = "no load report yet: balanced slot counts"
	}
	p.Blocked = blockedSlots(in, nodes, index)
	var spent int64
	after := slices.Clone(current)
	bytesAfter := slices.Clone(bytesOf)
	next := make([]int, len(nodes)) // next movable index per donor
	prevFrom, prevTo := -1, -1
	for donors.Len() > 0 {
		d := donors.take(prevFrom)
		r := recipients.take(prevTo)
		s := movable[d.node][next[d.node]]
		next[d.node]++
		b := slotBytes(in, s)
		if (in.MaxMoves > 0 && len(p.Moves) >= in.MaxMoves) || (in.MaxBytes > 0 && spent+b > in.MaxBytes) {
			p.Note = strings.TrimPrefix(p.Note+"; stopped at the budget", "; ")
			break
		}
		spent += b
		p.Moves = append(p.Moves, Move{
			Slot:   s,
			From:   nodes[d.node].ID,
			To:     nodes[r.node].ID,
			Bytes:  b,
			Reason: reason(nodes[d.node], nodes[r.node], current[d.node], target[d.node], current[r.node], target[r.node]),
		})
		p.TotalBytes += b
		after[d.node]--
		after[r.node]++
		bytesAfter[d.node] -= b
		bytesAfter[r.node] += b
		donors.putBack(d)
		recipients.putBack(r)
		prevFrom, prevTo = d.node, r.node
	}
	for i, n := range nodes {
		p.Nodes = append(p.Nodes, NodeChange{
			ID: n.ID, State: n.State, Weight: n.Weight,
			SlotsBefore: current[i], SlotsAfter: after[i], TargetSlots: target[i],
			BytesBefore: bytesOf[i], BytesAfter: bytesAfter[i],
		})
	}
	p.Estimate = Estimate(p.TotalBytes, len(p.Moves), in.Throttle, in.PerMove)
	p.Balanced = len(p.Moves) == 0 && len(p.Blocked) == 0
	p.ID = planID(p)
	return p, nil
}

// Estimate is the time to move total bytes in n moves at throttle bytes per
// second (0: unlimited) with perMove fixed cost per move.
func Estimate(total int64, n int, throttle int64, perMove time.Duration) time.Duration {
	d := time.Duration(n) * perMove
	if throttle > 0 {
		d += time.Duration(float64(total) / float64(throttle) * float64(time.Second))
	}
	return d
}

func reason(from, to Node, fromCur, fromTarget, toCur, toTarget int) string {
	var why string
	switch from.State {
	case StateDraining:
		why = fmt.Sprintf("%s is draining", from.ID)
	case StateDown:
		why = fmt.Sprintf("%s is down", from.ID)
	default:
		why = fmt.Sprintf("%s holds %d slots, target %d", from.ID, fromCur, fromTarget)
	}
	if toCur == 0 {
		return fmt.Sprintf("%s; %s is new, target %d", why, to.ID, toTarget)
	}
	return fmt.Sprintf("%s; %s holds %d, target %d", why, to.ID, toCur, toTarget)
}

func slotBytes(in Input, s int) int64 {
	if in.SlotBytes == nil {
		return 0
	}
	return in.SlotBytes[s]
}

func validate(in Input) error {
	if len(in.Owners) != slots.Count {
		return fmt.Errorf("%w: table has %d slots, want %d", ErrInvalid, len(in.Owners), slots.Count)
	}
	if in.SlotBytes != nil && len(in.SlotBytes) != slots.Count {
		return fmt.Errorf("%w: sizes for %d slots, want %d", ErrInvalid, len(in.SlotBytes), slots.Count)
	}
	seen, err := validateNodes(in.Nodes)
	if err != nil {
		return err
	}
	if _, err := ParseBalanceBy(string(in.BalanceBy)); err != nil {
		return err
	}
	if t := in.Tolerance; math.IsNaN(t) || t < 0 || t >= 1 {
		return fmt.Errorf("%w: tolerance %v; want 0 <= tolerance < 1 (0.10 is 10%%)", ErrInvalid, t)
	}
	if in.MaxBytes < 0 || in.MaxMoves < 0 {
		return fmt.Errorf("%w: budget of %d bytes and %d moves; want >= 0 (0: no limit)", ErrInvalid, in.MaxBytes, in.MaxMoves)
	}
	for _, id := range slices.Sorted(maps.Keys(in.Loads)) {
		if !seen[id] {
			continue // a report from a node not in the set: ignored
		}
		if err := in.Loads[id].Validate(); err != nil {
			return fmt.Errorf("%w: load of node %s: %v", ErrInvalid, id, err)
		}
	}
	for s, owner := range in.Owners {
		if owner == "" {
			return fmt.Errorf("%w: slot %d has no owner; bootstrap the directory first", ErrInvalid, s)
		}
		if !seen[owner] {
			return fmt.Errorf("%w: slot %d is owned by %q, which is not in the node set", ErrInvalid, s, owner)
		}
	}
	return nil
}

// Check reports whether the moves of p not yet done still fit the table in
// cur: each move's source still owns its slot and is not down (a move copies
// from its source), and its target is still an active node. done is the number of moves of p already carried out. The
// error says what changed, so an operator knows to re-plan.
func Check(p *Plan, done int, cur Input) error {
	if len(cur.Owners) != slots.Count {
		return fmt.Errorf("%w: table has %d slots, want %d", ErrInvalid, len(cur.Owners), slots.Count)
	}
	state := make(map[string]string, len(cur.Nodes))
	for _, n := range cur.Nodes {
		state[n.ID] = n.State
	}
	for _, m := range p.Moves[min(done, len(p.Moves)):] {
		if m.Slot < 0 || m.Slot >= slots.Count {
			return fmt.Errorf("%w: plan %s moves slot %d, out of range 0-%d", ErrInvalid, p.ID, m.Slot, slots.Count-1)
		}
		if owner := cur.Owners[m.Slot]; owner != m.From {
			return fmt.Errorf("%w: plan %s (version %d) moves slot %d from %s, but at version %d %s owns it; run the plan again", ErrStale, p.ID, p.BaseVersion, m.Slot, m.From, cur.Version, owner)
		}
		if cur.Busy != nil && cur.Busy.Contains(slots.MustNew(m.Slot)) {
			return fmt.Errorf("%w: plan %s moves slot %d, which has another move in flight; wait for it or cancel it", ErrStale, p.ID, m.Slot)
		}
		if state[m.From] == StateDown {
			return fmt.Errorf("%w: plan %s moves slot %d from %s, which is down: a move copies from its source; wait for %s to return or run the plan again", ErrStale, p.ID, m.Slot, m.From, m.From)
		}
		switch st, ok := state[m.To]; {
		case !ok:
			return fmt.Errorf("%w: plan %s moves slot %d to %s, which is no longer a node; run the plan again", ErrStale, p.ID, m.Slot, m.To)
		case st != StateActive:
			return fmt.Errorf("%w: plan %s moves slot %d to %s, which is now %s; run the plan again", ErrStale, p.ID, m.Slot, m.To, st)
		}
	}
	return nil
}
