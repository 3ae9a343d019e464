package planner

// Replica plans: the types, the input's validation and ComputeReplicas.

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/slotd/slotd/slots"
)

// MaxRF is the largest replication factor a replica plan takes.
const MaxRF = 5

// Errors returned by ComputeReplicas, besides ErrInvalid for input of the
// wrong shape.
var (
	// ErrPolicy marks a replication policy the nodes cannot meet: rf out of
	// 1-MaxRF or above the number of zones, min_isr out of 1-rf.
	ErrPolicy = errors.New("planner: bad replication policy")
	// ErrNoZone marks an active node without a zone while rf > 1.
	ErrNoZone = errors.New("planner: node has no zone")
	// ErrUnknownNode marks a replica set that names a node not in the node set.
	ErrUnknownNode = errors.New("planner: unknown node")
)

// ReplicaSet is one slot's replicas as the directory holds them.
type ReplicaSet struct {
	// ISR is the in-sync replicas, the primary first.
	ISR []string `json:"isr"`
	// Learners are replicas being filled, not yet in the ISR.
	Learners []string `json:"learners,omitempty"`
}

// Primary is the slot's primary: the first of the ISR.
func (r ReplicaSet) Primary() string {
	if len(r.ISR) == 0 {
		return ""
	}
	return r.ISR[0]
}

// ReplicaInput is everything a replica plan depends on.
type ReplicaInput struct {
	// Version is the directory version the sets were read at.
	Version uint64
	// Sets holds the replica set of every slot; len(Sets) == slots.Count.
	// At rf 1 each is the owner alone.
	Sets []ReplicaSet
	// Nodes is the desired node set: weights, states and zones. Every
	// replica must be on one of them; nodes holding nothing yet are filled.
	Nodes []Node
	// RF is the number of replicas each slot should have (1-MaxRF) and
	// MinISR the fewest in-sync replicas a step may leave (1-RF).
	RF     int
	MinISR int
	// SlotBytes optionally holds the size of every slot (nil when unknown).
	SlotBytes []int64
	// Loads optionally holds each node's last load report, by node id. A
	// slot's requests are counted on its primary, from the primary's report.
	Loads map[string]NodeLoad
	// Busy holds slots with a step in flight: the plan leaves them alone.
	Busy *slots.Set
	// Tolerance is the dead band of the load goal (0: DefaultTolerance).
	Tolerance float64
}

// StepKind names a replica step, as docs/replication.md's step table does.
type StepKind string

// The four steps a replica plan is made of.
const (
	// StepAddLearner copies the slot from its primary into Node.
	StepAddLearner StepKind = "add-learner"
	// StepJoinISR makes learner Node an in-sync replica.
	StepJoinISR StepKind = "join-isr"
	// StepTransferPrimary makes in-sync replica Node the primary in From's
	// place: a fenced cutover that copies nothing.
	StepTransferPrimary StepKind = "transfer-primary"
	// StepRemoveReplica drops Node's replica (never the primary's, never
	// below min_isr).
	StepRemoveReplica StepKind = "remove-replica"
)

// Step is one step of a replica plan: one change to one slot's set.
type Step struct {
	Kind StepKind `json:"kind"`
	Slot int      `json:"slot"`
	// Node is the learner added, the replica joining the ISR, the new
	// primary or the replica removed.
	Node string `json:"node"`
	// From is the old primary of a transfer.
	From string `json:"from,omitempty"`
	// Bytes is what an add-learner copies.
	Bytes  int64  `json:"bytes,omitempty"`
	Reason string `json:"reason"`
}

func (s Step) String() string {
	if s.Kind == StepTransferPrimary {
		return fmt.Sprintf("%s %d %s -> %s", s.Kind, s.Slot, s.From, s.Node)
	}
	return fmt.Sprintf("%s %d %s", s.Kind, s.Slot, s.Node)
}

// ReplicaNode is one node's replicas and primaries before and after a plan.
type ReplicaNode struct {
	ID     string `json:"id"`
	Zone   string `json:"zone,omitempty"`
	State  string `json:"state"`
	Weight int    `json:"weight"`
	// Replicas counts every replica (primary, ISR or learner) the node holds.
	ReplicasBefore  int `json:"replicas_before"`
	ReplicasAfter   int `json:"replicas_after"`
	TargetReplicas  int `json:"target_replicas"`
	PrimariesBefore int `json:"primaries_before"`
	PrimariesAfter  int `json:"primaries_after"`
	TargetPrimaries int `json:"target_primaries"`
	// Load is the bytes the node's replicas hold and the requests its
	// primaries serve, when sizes or loads are known.
	LoadBefore Load `json:"load_before"`
	LoadAfter  Load `json:"load_after"`
}

// ReplicaZone is one zone's replicas before and after a plan.
type ReplicaZone struct {
	Zone           string `json:"zone"`
	Active         int    `json:"active_nodes"`
	ReplicasBefore int    `json:"replicas_before"`
	ReplicasAfter  int    `json:"replicas_after"`
	TargetReplicas int    `json:"target_replicas"`
}

// UnderReplicated is a group of slots the plan leaves with fewer than rf
// replicas on live nodes, and why.
type UnderReplicated struct {
	Slots    string `json:"slots"` // range notation
	Count    int    `json:"count"`
	Replicas int    `json:"replicas"`
	Reason   string `json:"reason"`
}

// ReplicaPlan is the ordered steps that take every slot's replica set to the
// one the node set and policy call for. A slot's steps are in the order they
// must run; the executor runs one step per slot at a time.
type ReplicaPlan struct {
	ID          string        `json:"id"`
	BaseVersion uint64        `json:"base_version"`
	RF          int           `json:"rf"`
	MinISR      int           `json:"min_isr"`
	Steps       []Step        `json:"steps"`
	Nodes       []ReplicaNode `json:"nodes"`
	Zones       []ReplicaZone `json:"zones"`
	TotalBytes  int64         `json:"total_bytes"`
	// UnderReplicated lists the slots left below rf, grouped by reason.
	UnderReplicated []UnderReplicated `json:"under_replicated,omitempty"`
	// Blocked lists slots or replicas no step may touch, by node: a down
	// primary, a replica that cannot leave a draining node.
	Blocked []Blocked `json:"blocked,omitempty"`
	// HotSpots names slots whose requests alone exceed their primary's band.
	HotSpots []HotSpot `json:"hot_spots,omitempty"`
	Note     string    `json:"note,omitempty"`
}

// ComputeReplicas returns the plan that takes in.Sets to rf replicas per
// slot in distinct zones, balanced by weight; the package doc gives the
// rules. It returns ErrPolicy, ErrNoZone, ErrUnknownNode or ErrInvalid for
// input it cannot plan.
func ComputeReplicas(in ReplicaInput) (*ReplicaPlan, error) {
	rp, err := newReplicaPlanner(in)
	if err != nil {
		return nil, err
	}
	rp.shrink()
	rp.replace()
	rp.grow()
	rp.balanceZones()
	rp.balanceNodes()
	rp.choosePrimaries()
	rp.balancePrimaries()
	rp.balanceOps()
	return rp.plan()
}

// validateReplicas checks the input's shape and policy; nodes are in id
// order and index maps ids to them.
func validateReplicas(in ReplicaInput, nodes []Node) error {
	if len(in.Sets) != slots.Count {
		return fmt.Errorf("%w: %d replica sets, want one per slot (%d)", ErrInvalid, len(in.Sets), slots.Count)
	}
	if in.SlotBytes != nil && len(in.SlotBytes) != slots.Count {
		return fmt.Errorf("%w: sizes for %d slots, want %d", ErrInvalid, len(in.SlotBytes), slots.Count)
	}
	if in.RF < 1 || in.RF > MaxRF {
		return fmt.Errorf("%w: rf %d; want 1-%d", ErrPolicy, in.RF, MaxRF)
	}
	if in.MinISR < 1 || in.MinISR > in.RF {
		return fmt.Errorf("%w: min_isr %d with rf %d; want 1 <= min_isr <= rf", ErrPolicy, in.MinISR, in.RF)
	}
	if t := in.Tolerance; t < 0 || t >= 1 || t != t {
		return fmt.Errorf("%w: tolerance %v; want 0 <= tolerance < 1 (0.10 is 10%%)", ErrInvalid, t)
	}
	// Node ids, weights and states follow the count planner's rules.
	if _, err := validateNodes(nodes); err != nil {
		return err
	}
	zones := map[string]bool{}
	for _, n := range nodes {
		if n.State == StateActive && n.Zone == "" && in.RF > 1 {
			return fmt.Errorf("%w: %s is active without a zone and rf is %d; give it a zone or drain it", ErrNoZone, n.ID, in.RF)
		}
		// A lost zone (its nodes down) still counts: it leaves slots
		// under-replicated, it does not make the policy wrong.
		if n.State != StateDraining && n.Zone != "" {
			zones[n.Zone] = true
		}
	}
	if in.RF > 1 && in.RF > len(zones) {
		return fmt.Errorf("%w: rf %d needs %d zones with active nodes, the nodes are in %d (%s); add nodes in another zone or lower rf",
			ErrPolicy, in.RF, in.RF, len(zones), strings.Join(slices.Sorted(maps.Keys(zones)), ", "))
	}
	for _, id := range slices.Sorted(maps.Keys(in.Loads)) {
		if err := in.Loads[id].Validate(); err != nil {
			return fmt.Errorf("load of node %s: %w", id, err)
		}
	}
	return nil
}

// validateNodes refuses an empty or repeated id, a bad state, an active node
// without weight, or no active node at all. It returns the set of ids.
func validateNodes(nodes []Node) (map[string]bool, error) {
	seen := make(map[string]bool, len(nodes))
	active := 0
	for _, n := range nodes {
		switch {
		case n.ID == "":
			return nil, fmt.Errorf("%w: a node has an empty id", ErrInvalid)
		case seen[n.ID]:
			return nil, fmt.Errorf("%w: node %s is listed twice", ErrInvalid, n.ID)
		case n.Weight <= 0 && n.State == StateActive:
			return nil, fmt.Errorf("%w: node %s has weight %d; weights must be > 0 (drain a node instead of weighting it 0)", ErrInvalid, n.ID, n.Weight)
		case n.State != StateActive && n.State != StateDraining && n.State != StateDown:
			return nil, fmt.Errorf("%w: node %s has state %q; want active, draining or down", ErrInvalid, n.ID, n.State)
		}
		seen[n.ID] = true
		if n.State == StateActive {
			active++
		}
	}
	if active == 0 {
		return nil, fmt.Errorf("%w: no active node to hold the slots", ErrInvalid)
	}
	return seen, nil
}

// sortedNodes returns the nodes in id order and each id's index.
func sortedNodes(in []Node) ([]Node, map[string]int) {
	nodes := slices.Clone(in)
	slices.SortFunc(nodes, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		index[n.ID] = i
	}
	return nodes, index
}
