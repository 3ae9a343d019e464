package directory

import (
	"time"

	"github.com/slotd/slotd/slots"
)

// NodeState is a node's state as placement sees it.
type NodeState string

// Node states. A node is down when the liveness loop says so, whatever the
// operator asked; otherwise draining once drained, else active. Only
// active nodes can receive slots.
const (
	NodeActive   NodeState = "active"
	NodeDraining NodeState = "draining"
	NodeDown     NodeState = "down"
)

// Node is a store node as the directory records it.
type Node struct {
	// ID is the node's stable name (never an address): 1-64 characters
	// from [A-Za-z0-9._-], starting with a letter or digit.
	ID string
	// Addr is where the node serves, host:port.
	Addr string
	// Zone is an optional failure domain.
	Zone string
	// Weight is the node's relative capacity, > 0.
	Weight int
	// State is derived from Draining and Down.
	State NodeState
	// Draining is the operator's request to empty the node. It survives
	// the node going down and coming back.
	Draining bool
	// Down is set by the liveness loop after missed heartbeats and cleared
	// only after the hold-down.
	Down bool
	// StateSince is when Down last changed (or when the node registered).
	StateSince time.Time
	// Registered is when the node was first registered.
	Registered time.Time
}

// Phase is the step a move in flight has reached.
type Phase string

// Move phases, in order. A move starts in PhaseCopy; AdvanceMove only goes
// forward; CommitMove requires PhaseFenced, so a slot never changes owner
// while the source may still accept writes for it.
const (
	PhaseCopy    Phase = "copy"
	PhaseCatchup Phase = "catchup"
	PhaseFenced  Phase = "fenced"
)

// phaseOrder gives each phase's rank; unknown phases are invalid.
var phaseOrder = map[Phase]int{PhaseCopy: 1, PhaseCatchup: 2, PhaseFenced: 3}

// Move is a move in flight: at most one per slot.
type Move struct {
	Slot    slots.Slot
	From    string // the owner when the move began; still the owner
	To      string
	MoveID  string
	PlanID  string // empty for a move outside a plan
	Index   int    // the move's place in its plan (with PlanID)
	Phase   Phase
	Reason  string // human-readable, shown by the CLI and kept in history
	By      string // operator or component that asked
	Started time.Time
	Updated time.Time // when Phase last changed
}

// MoveSpec asks for a move of one slot.
type MoveSpec struct {
	Slot slots.Slot
	// From must be the slot's current owner.
	From string
	// To must be an active node other than From.
	To string
	// MoveID names the move; empty means generate one.
	MoveID string
	// PlanID, when set, names the plan the move belongs to: the move
	// begins only while the plan's run key exists (the plan is applying),
	// and its result is stored as move Index of that plan.
	PlanID string
	Index  int
	Reason string
	By     string
	// ExpectVersion, when non-zero, makes BeginMove fail with ErrConflict
	// unless the directory is at exactly this version (for callers that
	// decided on a snapshot and want nothing to have changed since).
	// Zero means re-read and retry while the move still makes sense.
	ExpectVersion uint64
}

// Change kinds recorded in history.
const (
	ChangeBootstrap    = "bootstrap"
	ChangeNodeRegister = "node-register"
	ChangeNodeAddr     = "node-addr"
	ChangeNodeWeight   = "node-weight"
	ChangeNodeDrain    = "node-drain"
	ChangeNodeUndrain  = "node-undrain"
	ChangeNodeRemove   = "node-remove"
	ChangeNodeDown     = "node-down"
	ChangeNodeUp       = "node-up"
	ChangeMoveBegin    = "move-begin"
	ChangeMoveAdvance  = "move-advance"
	ChangeMoveCommit   = "move-commit"
	ChangeMoveAbort    = "move-abort"
	ChangeReindexNodes = "reindex-nodes"
)

// Change is one history entry: what changed at Version, and why.
type Change struct {
	Version uint64
	Kind    string
	// Slot, From, To, MoveID, PlanID and Phase are set for move kinds.
	Slot   slots.Slot
	From   string
	To     string
	MoveID string
	PlanID string
	Phase  Phase
	// Node is set for node kinds.
	Node   string
	Reason string
	By     string
	At     time.Time
}

// Snapshot is the full table at exactly one version. It is safe to share
// between goroutines as long as nobody modifies it: treat Nodes and Moves
// as read-only.
type Snapshot struct {
	Version uint64
	Nodes   []Node // sorted by ID
	Moves   []Move // sorted by slot
	// Replication is the replication policy at Version.
	Replication Replication

	owners [slots.Count]uint16 // node index per slot
	idxOf  []uint16            // node index of Nodes[i]
	byIdx  map[uint16]int      // node index -> position in Nodes
	byID   map[string]int      // node id -> position in Nodes
	moveAt map[uint16]int      // slot -> position in Moves
	// replicas are the stored replica sets (replicas.go), shared with
	// the state they came from: chunks are never changed once shared.
	replicas [chunks]*replicaChunk
}

// Owner returns the id of the node that owns s.
func (s *Snapshot) Owner(sl slots.Slot) string {
	if i, ok := s.byIdx[s.owners[sl.Int()]]; ok {
		return s.Nodes[i].ID
	}
	return ""
}

// Owners returns the owner id of every slot, indexed by slot number.
func (s *Snapshot) Owners() []string {
	out := make([]string, slots.Count)
	// slotd's watch hub calls this for every version: an id per node
	// index in a slice, not a map lookup per slot (16,384 of them took
	// most of the hub's time per version).
	top := 0
	for _, idx := range s.idxOf {
		top = max(top, int(idx))
	}
	if top < 1<<12 {
		ids := make([]string, top+1)
		for i, idx := range s.idxOf {
			ids[idx] = s.Nodes[i].ID
		}
		for i, idx := range s.owners {
			if int(idx) < len(ids) {
				out[i] = ids[idx] // "" for an index that is no node's
			}
		}
		return out
	}
	for i := range out {
		out[i] = s.Owner(slots.MustNew(i))
	}
	return out
}

// OwnerPositions returns, indexed by slot number, the position in Nodes of
// every slot's owner, or NoPosition for an index that is no node's. It is
// Owners without a string per slot: slotd's watch hub calls it for every
// version (Owners' 16,384 strings were 256 KiB a version).
func (s *Snapshot) OwnerPositions() []uint16 {
	out := make([]uint16, slots.Count)
	top := 0
	for _, idx := range s.idxOf {
		top = max(top, int(idx))
	}
	if top >= 1<<12 {
		for i := range out {
			out[i] = NoPosition
			if p, ok := s.byIdx[s.owners[i]]; ok {
				out[i] = uint16(p)
			}
		}
		return out
	}
	pos := make([]uint16, top+1)
	for i := range pos {
		pos[i] = NoPosition
	}
	for i, idx := range s.idxOf {
		pos[idx] = uint16(i)
	}
	for i, idx := range s.owners {
		out[i] = NoPosition
		if int(idx) < len(pos) {
			out[i] = pos[idx]
		}
	}
	return out
}

// NoPosition is OwnerPositions' entry for a slot whose owner is no node in
// Nodes. No position is ever NoPosition: there are fewer than maxNodes nodes.
const NoPosition = noOwner

// Node returns the node with the given id.
func (s *Snapshot) Node(id string) (Node, bool) {
	i, ok := s.byID[id]
	if !ok {
		return Node{}, false
	}
	return s.Nodes[i], true
}

// Move returns the move in flight for sl, if any.
func (s *Snapshot) Move(sl slots.Slot) (Move, bool) {
	i, ok := s.moveAt[sl.Uint16()]
	if !ok {
		return Move{}, false
	}
	return s.Moves[i], true
}

// SlotsOf returns the slots owned by the node id.
func (s *Snapshot) SlotsOf(id string) slots.Set {
	var set slots.Set
	i, ok := s.byID[id]
	if !ok {
		return set
	}
	idx := s.idxOf[i]
	for n, o := range s.owners {
		if o == idx {
			set.Add(slots.MustNew(n))
		}
	}
	return set
}

// Counts returns the number of slots each node owns, including nodes that
// own none.
func (s *Snapshot) Counts() map[string]int {
	out := make(map[string]int, len(s.Nodes))
	for _, n := range s.Nodes {
		out[n.ID] = 0
	}
	// Count by owner index first: a map lookup per slot costs more than
	// the rest of a watcher's work per version.
	top := 0
	for idx := range s.byIdx {
		top = max(top, int(idx))
	}
	per := make([]int, top+1)
	for _, o := range s.owners {
		if int(o) <= top {
			per[o]++
		}
	}
	for idx, i := range s.byIdx {
		out[s.Nodes[i].ID] = per[idx]
	}
	return out
}
