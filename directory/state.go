package directory

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/slotd/slotd/slots"
)

// nodeRec is a node as stored under nodes/<id>.
type nodeRec struct {
	ID         string    `json:"id"`
	Index      uint16    `json:"index"`
	Addr       string    `json:"addr"`
	Zone       string    `json:"zone,omitempty"`
	Weight     int       `json:"weight"`
	Draining   bool      `json:"draining,omitempty"`
	Down       bool      `json:"down,omitempty"`
	StateSince time.Time `json:"state_since"`
	Registered time.Time `json:"registered"`
}

func (n *nodeRec) state() NodeState {
	switch {
	case n.Down:
		return NodeDown
	case n.Draining:
		return NodeDraining
	}
	return NodeActive
}

func (n *nodeRec) node() Node {
	return Node{
		ID: n.ID, Addr: n.Addr, Zone: n.Zone, Weight: n.Weight, State: n.state(),
		Draining: n.Draining, Down: n.Down, StateSince: n.StateSince, Registered: n.Registered,
	}
}

// moveRec is a move as stored under moves/<slot>.
type moveRec struct {
	Slot   uint16 `json:"slot"`
	From   string `json:"from"`
	To     string `json:"to"`
	MoveID string `json:"move_id"`
	PlanID string `json:"plan_id,omitempty"`
	Phase  Phase  `json:"phase"`
	// Index is the move's place in its plan (with PlanID).
	Index   int       `json:"index,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	By      string    `json:"by,omitempty"`
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
}

func (m *moveRec) move() Move {
	return Move{
		Slot: slots.MustNew(int(m.Slot)), From: m.From, To: m.To, MoveID: m.MoveID, PlanID: m.PlanID,
		Index: m.Index, Phase: m.Phase, Reason: m.Reason, By: m.By, Started: m.Started, Updated: m.Updated,
	}
}

// legacyIndex fills Index for a move begun by a mover of schema 1, which
// stored no index but named its moves "<plan id>.<index>".
func (m *moveRec) legacyIndex() {
	if m.Index != 0 || m.PlanID == "" || !strings.HasPrefix(m.MoveID, m.PlanID+".") {
		return
	}
	if i, err := strconv.Atoi(m.MoveID[len(m.PlanID)+1:]); err == nil && i >= 0 {
		m.Index = i
	}
}

// changeRec is a Change as stored under history/<version>.
type changeRec struct {
	Version uint64    `json:"version"`
	Kind    string    `json:"kind"`
	Slot    *int      `json:"slot,omitempty"`
	From    string    `json:"from,omitempty"`
	To      string    `json:"to,omitempty"`
	MoveID  string    `json:"move_id,omitempty"`
	PlanID  string    `json:"plan_id,omitempty"`
	Phase   Phase     `json:"phase,omitempty"`
	Node    string    `json:"node,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	By      string    `json:"by,omitempty"`
	At      time.Time `json:"at"`
}

func recFromChange(c *Change, hasSlot bool) changeRec {
	r := changeRec{
		Version: c.Version, Kind: c.Kind, From: c.From, To: c.To, MoveID: c.MoveID, PlanID: c.PlanID,
		Phase: c.Phase, Node: c.Node, Reason: c.Reason, By: c.By, At: c.At,
	}
	if hasSlot {
		n := c.Slot.Int()
		r.Slot = &n
	}
	return r
}

func (r *changeRec) change() (Change, error) {
	c := Change{
		Version: r.Version, Kind: r.Kind, From: r.From, To: r.To, MoveID: r.MoveID, PlanID: r.PlanID,
		Phase: r.Phase, Node: r.Node, Reason: r.Reason, By: r.By, At: r.At,
	}
	if r.Slot != nil {
		s, err := slots.New(*r.Slot)
		if err != nil {
			return Change{}, fmt.Errorf("history entry %d: %w", r.Version, err)
		}
		c.Slot = s
	}
	return c, nil
}

// state is the decoded table as of one etcd revision. Mutations read a
// fresh state per attempt and change it in place; watchers keep one and
// apply events to it. It is not safe for concurrent use.
type state struct {
	schema     int
	hasVersion bool
	version    uint64
	versionRev int64 // mod revision of the version key; 0 when absent
	haveChunk  [chunks]bool
	owners     [slots.Count]uint16
	nodes      map[string]*nodeRec
	moves      map[uint16]*moveRec
	// runs holds the plans whose run key exists (BeginMove checks it).
	runs map[string]bool
	// cached marks the state an update took from Directory.cache: it may
	// lag etcd, so what it says of run keys is a hint (the txn's compare
	// decides), never a reason to refuse.
	cached bool
	// replicas holds the stored replica sets per chunk (replicas.go);
	// policy is the replication policy (replication.go).
	replicas [chunks]*replicaChunk
	policy   Replication
	// next is the version the change being built gets, set by the group
	// writer before each fn (a replica step's new epoch is its version).
	next uint64
}

func newState() *state {
	st := &state{nodes: map[string]*nodeRec{}, moves: map[uint16]*moveRec{}, runs: map[string]bool{}, policy: DefaultReplication()}
	for i := range st.owners {
		st.owners[i] = noOwner
	}
	return st
}

// bootstrapped reports whether every owners chunk exists.
func (st *state) bootstrapped() bool {
	for _, ok := range st.haveChunk {
		if !ok {
			return false
		}
	}
	return true
}

// apply decodes one key-value (a read result or a watch PUT) into st.
func (st *state) apply(k keys, kv *mvccpb.KeyValue) error {
	kind, chunk, id, slot := k.parse(string(kv.Key))
	switch kind {
	case kindSchema:
		n, err := strconv.Atoi(strings.TrimSpace(string(kv.Value)))
		if err != nil || n < 0 {
			return fmt.Errorf("schema key holds %q, not a schema version", kv.Value)
		}
		st.schema = n
	case kindVersion:
		v, err := strconv.ParseUint(string(kv.Value), 10, 64)
		if err != nil {
			return fmt.Errorf("version key holds %q, not a version", kv.Value)
		}
		st.hasVersion, st.version, st.versionRev = true, v, kv.ModRevision
	case kindChunk:
		if len(kv.Value) != 2*chunkSlots {
			return fmt.Errorf("owners chunk %d is %d bytes, want %d", chunk, len(kv.Value), 2*chunkSlots)
		}
		for i := range chunkSlots {
			st.owners[chunk*chunkSlots+i] = binary.BigEndian.Uint16(kv.Value[2*i:])
		}
		st.haveChunk[chunk] = true
	case kindNode:
		var n nodeRec
		if err := json.Unmarshal(kv.Value, &n); err != nil {
			return fmt.Errorf("node %q: %w", id, err)
		}
		st.nodes[id] = &n
	case kindMove:
		var m moveRec
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			return fmt.Errorf("move of slot %d: %w", slot, err)
		}
		m.legacyIndex()
		st.moves[slot] = &m
	case kindRun:
		st.runs[id] = true
	case kindReplicas:
		c, err := decodeReplicas(kv.Value)
		if err != nil {
			return fmt.Errorf("replicas chunk %d: %w", chunk, err)
		}
		st.replicas[chunk] = c
	case kindReplication:
		var p Replication
		if err := json.Unmarshal(kv.Value, &p); err != nil {
			return fmt.Errorf("replication policy: %w", err)
		}
		st.policy = p
	}
	return nil
}

// remove applies a watch DELETE to st.
func (st *state) remove(k keys, key string) {
	kind, chunk, id, slot := k.parse(key)
	switch kind {
	case kindSchema:
		st.schema = 0
	case kindVersion:
		st.hasVersion, st.version, st.versionRev = false, 0, 0
	case kindChunk:
		st.haveChunk[chunk] = false
		for i := range chunkSlots {
			st.owners[chunk*chunkSlots+i] = noOwner
		}
	case kindNode:
		delete(st.nodes, id)
	case kindMove:
		delete(st.moves, slot)
	case kindRun:
		delete(st.runs, id)
	case kindReplicas:
		st.replicas[chunk] = nil
	case kindReplication:
		st.policy = DefaultReplication()
	}
}

// encodeChunk returns the stored form of owners chunk i.
func (st *state) encodeChunk(i int) []byte {
	b := make([]byte, 2*chunkSlots)
	for j := range chunkSlots {
		binary.BigEndian.PutUint16(b[2*j:], st.owners[i*chunkSlots+j])
	}
	return b
}

// ownerOf returns the record of the owner of slot s, or nil.
func (st *state) ownerOf(s uint16) *nodeRec {
	idx := st.owners[s]
	for _, n := range st.nodes {
		if n.Index == idx {
			return n
		}
	}
	return nil
}

// freeIndex returns the lowest node index no node uses.
func (st *state) freeIndex() (uint16, bool) {
	used := make(map[uint16]bool, len(st.nodes))
	for _, n := range st.nodes {
		used[n.Index] = true
	}
	for i := range uint16(maxNodes) {
		if !used[i] {
			return i, true
		}
	}
	return 0, false
}

// snapshot copies st into an immutable Snapshot.
func (st *state) snapshot() *Snapshot {
	s := &Snapshot{
		Version: st.version,
		owners:  st.owners,
		byIdx:   make(map[uint16]int, len(st.nodes)),
		byID:    make(map[string]int, len(st.nodes)),
		moveAt:  make(map[uint16]int, len(st.moves)),
	}
	s.Replication, s.replicas = st.policy, st.replicas
	for _, id := range slices.Sorted(maps.Keys(st.nodes)) {
		n := st.nodes[id]
		s.byIdx[n.Index] = len(s.Nodes)
		s.byID[id] = len(s.Nodes)
		s.idxOf = append(s.idxOf, n.Index)
		s.Nodes = append(s.Nodes, n.node())
	}
	for _, sl := range slices.Sorted(maps.Keys(st.moves)) {
		s.moveAt[sl] = len(s.Moves)
		s.Moves = append(s.Moves, st.moves[sl].move())
	}
	return s
}
