package slotmap

import (
	"errors"
	"fmt"
	"slices"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// Errors returned when building, decoding or updating a map.
var (
	// ErrInvalid: the input does not describe a valid map or delta; nothing changed.
	ErrInvalid = errors.New("slotmap: invalid map")
	// ErrGap: a delta does not start at the map's version; fetch a full map.
	ErrGap = errors.New("slotmap: delta does not follow this map")
)

// MaxNodes is the largest node table a map can hold (owner indexes are 16 bits).
const MaxNodes = 1 << 16

// Node is one store node as the map knows it.
type Node struct {
	ID     string
	Addr   string
	Zone   string
	Weight uint32
	State  slotdv1.NodeState
}

// Migration is a slot move in flight.
type Migration struct {
	Slot   slots.Slot
	From   string
	To     string
	Phase  slotdv1.MovePhase
	MoveID string
}

// Route is where a key goes: its slot and the slot's owner. It is three
// words, returned in registers: Owner and Addr read the owner's entry in the
// immutable map's id and address tables (16 bytes a node, so that a
// thousand nodes' ids take 16 KiB of cache), which is what makes Route
// cost little more than the hash.
type Route struct {
	Slot slots.Slot
	idx  uint16 // the owner's index in m's node table
	// Version is the directory version of the map the route came from.
	Version uint64
	m       *Map // nil on a map without owners
}

// Owner returns the owner's node id, "" when the map has no owners.
func (r Route) Owner() string {
	if r.m == nil {
		return ""
	}
	return r.m.nodeIDs[r.idx]
}

// Addr returns the owner's host:port, "" when the map has no owners.
func (r Route) Addr() string {
	if r.m == nil {
		return ""
	}
	return r.m.nodeAddrs[r.idx]
}

// OK reports whether the route names an owner.
func (r Route) OK() bool { return r.m != nil }

// Snapshot is the input of New: the directory's table at one version.
type Snapshot struct {
	Version   uint64
	ClusterID string
	Nodes     []Node
	// Owners holds the owner's node id for every slot: exactly slots.Count
	// entries, each naming a node in Nodes. Empty for a directory that has
	// not been bootstrapped.
	Owners []string
	// OwnerIndexes, when set, is used instead of Owners: the position in
	// Nodes of every slot's owner, exactly slots.Count entries. slotd's hub
	// builds a map per version; indexes spare it a string per slot.
	OwnerIndexes []uint16
	Migrations   []Migration
	// Replicas holds the slots' replica sets, each ISR's primary the
	// slot's owner; a slot without one is its owner alone at epoch 0.
	// Empty at rf 1.
	Replicas []ReplicaSet
	// EachReplicaSet, when set, is used instead of Replicas: it calls fn
	// for every slot's set in slot order, members by position in Nodes,
	// the primary first in isr (the lists are fn's only for the call).
	// slotd's hub builds a map per version; positions spare it a set of
	// strings per slot.
	EachReplicaSet func(fn func(s slots.Slot, epoch uint64, isr, learners []uint16))
}

// Map is the slot map at one version. The zero Map is an empty map at
// version 0. A Map is never modified after it is built.
type Map struct {
	version   uint64
	clusterID string
	// assigned is false until the directory is bootstrapped; until then no
	// slot has an owner, though nodes may already be registered.
	assigned bool
	// nodes[owners.get(s)] owns slot s when assigned.
	nodes []Node
	// nodeIDs and nodeAddrs are the ids and addresses of nodes, index for
	// index: what Route reads. seal makes them before a map is returned;
	// sealedFor is the node table they were made from, so that derived
	// maps sharing it share them too.
	nodeIDs, nodeAddrs []string
	sealedFor          *Node
	migrations         []Migration
	// patches are slots set by a redirect newer than version; they survive
	// updates older than their own version (see WithOwner).
	patches []patch
	// replicas holds the replica sets other than an owner alone at epoch
	// 0; nil when there are none (rf 1). Route never reads it.
	replicas *replicaTable
	// owners is last: its table of recent slots holds no pointers, and
	// the collector scans a Map only up to its last pointer.
	owners ownerTable
}

type patch struct {
	slot    slots.Slot
	version uint64
}

// New builds a map from a snapshot of the directory.
func New(s Snapshot) (*Map, error) {
	m := &Map{version: s.Version, clusterID: s.ClusterID}
	idx, err := m.setNodes(s.Nodes)
	if err != nil {
		return nil, err
	}
	if len(s.OwnerIndexes) > 0 {
		return m.setOwnerIndexes(s, idx)
	}
	if len(s.Owners) == 0 {
		if len(s.Replicas) > 0 || s.EachReplicaSet != nil {
			return nil, fmt.Errorf("%w: replica sets without owners", ErrInvalid)
		}
		return m.seal(), m.setMigrations(s.Migrations)
	}
	if len(s.Owners) != slots.Count {
		return nil, fmt.Errorf("%w: %d owners, want %d", ErrInvalid, len(s.Owners), slots.Count)
	}
	m.assigned = true
	// Owners come in runs (a ring's ranges, a node's slots): a lookup per
	// run, not per slot, of the 16,384 (slotd builds a map per version).
	var prev string
	var n uint16
	t := m.owners.own()
	for i, id := range s.Owners {
		if i == 0 || id != prev {
			var ok bool
			if n, ok = idx[id]; !ok {
				return nil, fmt.Errorf("%w: slot %d: owner %q is not in the node table", ErrInvalid, i, id)
			}
			prev = id
		}
		t[i] = n
	}
	if err := m.setMigrations(s.Migrations); err != nil {
		return nil, err
	}
	if err := m.setReplicasOf(s, idx); err != nil {
		return nil, err
	}
	return m.seal(), nil
}

// setOwnerIndexes is New's end for a snapshot with OwnerIndexes.
func (m *Map) setOwnerIndexes(s Snapshot, idx map[string]uint16) (*Map, error) {
	if len(s.OwnerIndexes) != slots.Count {
		return nil, fmt.Errorf("%w: %d owner indexes, want %d", ErrInvalid, len(s.OwnerIndexes), slots.Count)
	}
	n := len(m.nodes)
	for i, p := range s.OwnerIndexes {
		if int(p) >= n {
			return nil, fmt.Errorf("%w: slot %d: owner index %d is not in the node table of %d", ErrInvalid, i, p, n)
		}
	}
	m.assigned = true
	copy(m.owners.own()[:], s.OwnerIndexes)
	if err := m.setMigrations(s.Migrations); err != nil {
		return nil, err
	}
	if err := m.setReplicasOf(s, idx); err != nil {
		return nil, err
	}
	return m.seal(), nil
}

// seal makes the tables Route reads from the node table, unless m shares
// the node table they were made from. Every function that returns a new
// map calls it last: a map is immutable from then on.
func (m *Map) seal() *Map {
	var first *Node
	if len(m.nodes) > 0 {
		first = &m.nodes[0]
	}
	if first == m.sealedFor && len(m.nodeIDs) == len(m.nodes) {
		return m
	}
	m.nodeIDs = make([]string, len(m.nodes))
	m.nodeAddrs = make([]string, len(m.nodes))
	for i, n := range m.nodes {
		m.nodeIDs[i], m.nodeAddrs[i] = n.ID, n.Addr
	}
	m.sealedFor = first
	return m
}

func (m *Map) setNodes(nodes []Node) (map[string]uint16, error) {
	if len(nodes) > MaxNodes {
		return nil, fmt.Errorf("%w: %d nodes, limit %d", ErrInvalid, len(nodes), MaxNodes)
	}
	idx := make(map[string]uint16, len(nodes))
	for i, n := range nodes {
		if n.ID == "" {
			return nil, fmt.Errorf("%w: node %d has an empty id", ErrInvalid, i)
		}
		if _, dup := idx[n.ID]; dup {
			return nil, fmt.Errorf("%w: node %q appears twice", ErrInvalid, n.ID)
		}
		idx[n.ID] = uint16(i)
	}
	m.nodes = slices.Clone(nodes)
	return idx, nil
}

// setMigrations sets a copy of the caller's ms.
func (m *Map) setMigrations(ms []Migration) error {
	return m.adoptMigrations(slices.Clone(ms))
}

// adoptMigrations sets ms itself, which nobody else holds: FromProto and
// Apply decode a fresh slice for every update (every delta carries all the
// moves in flight), and a copy of it was a second allocation per update in
// every client.
func (m *Map) adoptMigrations(ms []Migration) error {
	for _, mg := range ms {
		if m.index(mg.From) < 0 || m.index(mg.To) < 0 {
			return fmt.Errorf("%w: move of slot %d: %q -> %q names an unknown node", ErrInvalid, mg.Slot.Int(), mg.From, mg.To)
		}
	}
	m.migrations = ms
	return nil
}

// Version returns the directory version the map reflects.
func (m *Map) Version() uint64 { return m.version }

// ClusterID returns the identity of the directory the map came from.
func (m *Map) ClusterID() string { return m.clusterID }

// Empty reports whether the map has no owners (the directory has not been
// bootstrapped).
func (m *Map) Empty() bool { return !m.assigned }

// Route returns the slot of key and its owner. It does not allocate. On a
// map without owners the route is not OK.
func (m *Map) Route(key []byte) Route { return m.RouteSlot(slots.ForKey(key)) }

// RouteString is Route for a string key.
func (m *Map) RouteString(key string) Route { return m.RouteSlot(slots.ForString(key)) }

// RouteSlot returns the owner of slot s.
func (m *Map) RouteSlot(s slots.Slot) Route {
	if !m.assigned {
		return Route{Slot: s, Version: m.version}
	}
	return Route{Slot: s, Version: m.version, m: m, idx: m.owners.at(uint(s.Uint16()))}
}

// OwnerID returns the id of slot s's owner, "" on an empty map.
func (m *Map) OwnerID(s slots.Slot) string {
	if !m.assigned {
		return ""
	}
	return m.nodes[m.owners.get(s.Int())].ID
}

// SlotVersion returns the version that slot s's owner is known at: the map's
// version, or a newer one if a redirect patched the slot.
func (m *Map) SlotVersion(s slots.Slot) uint64 {
	for _, p := range m.patches {
		if p.slot == s {
			return p.version
		}
	}
	return m.version
}

// Node returns the node with the given id.
func (m *Map) Node(id string) (Node, bool) {
	if i := m.index(id); i >= 0 {
		return m.nodes[i], true
	}
	return Node{}, false
}

// Nodes returns a copy of the node table.
func (m *Map) Nodes() []Node { return slices.Clone(m.nodes) }

// Migrations returns a copy of the moves in flight.
func (m *Map) Migrations() []Migration { return slices.Clone(m.migrations) }

// Migration returns the move in flight for slot s, if any.
func (m *Map) Migration(s slots.Slot) (Migration, bool) {
	for _, mg := range m.migrations {
		if mg.Slot == s {
			return mg, true
		}
	}
	return Migration{}, false
}

// SlotsOf returns the slots owned by node id.
func (m *Map) SlotsOf(id string) slots.Set {
	var set slots.Set
	i := m.index(id)
	if i < 0 || !m.assigned {
		return set
	}
	for s := range slots.Count {
		if int(m.owners.get(s)) == i {
			set.Add(slots.MustNew(s))
		}
	}
	return set
}

func (m *Map) index(id string) int {
	for i := range m.nodes {
		if m.nodes[i].ID == id {
			return i
		}
	}
	return -1
}

// WithOwner returns a copy of m in which slot s belongs to the node at addr
// (id owner, which may be empty when a text redirect did not name it), known
// at version. It is how a client applies a MOVED redirect before the full map
// catches up. If version is not newer than what m knows about s, it returns m
// and false: a redirect never moves a map back.
//
// The patch outlives updates older than version (Apply, Replace) and is
// dropped by the first one at or past it.
func (m *Map) WithOwner(s slots.Slot, owner, addr string, version uint64) (*Map, bool) {
	if version <= m.SlotVersion(s) || !m.assigned {
		return m, false
	}
	c := m.clone()
	c.owners.set(s.Int(), c.nodeFor(owner, addr))
	c.patches = slices.DeleteFunc(c.patches, func(p patch) bool { return p.slot == s })
	c.patches = append(c.patches, patch{slot: s, version: version})
	return c.seal(), true
}

// nodeFor returns the index of the node matching a redirect, adding a node
// for an address the table does not know yet.
func (c *Map) nodeFor(owner, addr string) uint16 {
	for i, n := range c.nodes {
		if n.Addr == addr && (owner == "" || n.ID == owner) {
			return uint16(i)
		}
	}
	if len(c.nodes) >= MaxNodes {
		// Cannot grow; the next full map fixes the slot. Point at any node
		// with that address rather than fail a redirect.
		return c.owners.get(0)
	}
	// The id is what the redirect said (or the address when it said nothing)
	// so that the placeholder never shadows a real node in id lookups.
	id := owner
	if id == "" || c.index(id) >= 0 {
		id = placeholderPrefix + addr
	}
	c.nodes = append(c.nodes, Node{ID: id, Addr: addr, State: slotdv1.NodeState_NODE_STATE_ACTIVE})
	return uint16(len(c.nodes) - 1)
}

// clone copies everything a derived map may change.
func (m *Map) clone() *Map {
	c := *m
	// The owner array and the recent changes are shared; set records
	// changes in a copy of the recent changes.
	c.owners.mine, c.owners.rMine = false, false
	// The node table is shared too; the full slice expression makes any
	// append reallocate, and in-place writers clone it first.
	c.nodes = m.nodes[:len(m.nodes):len(m.nodes)]
	// Migrations are never written in place (only replaced whole), so the
	// clone shares them; the full slice expression makes an append copy.
	c.migrations = m.migrations[:len(m.migrations):len(m.migrations)]
	c.patches = slices.Clone(m.patches)
	return &c
}

// Replace returns next, carrying over m's patches newer than next's version.
// A client calls it when a full map arrives.
func (m *Map) Replace(next *Map) *Map {
	var keep []patch
	for _, p := range m.patches {
		if p.version > next.version {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 || !next.assigned {
		return next
	}
	c := next.clone()
	for _, p := range keep {
		r := m.RouteSlot(p.slot)
		owner := r.Owner()
		if isPlaceholder(owner) {
			owner = ""
		}
		c.owners.set(p.slot.Int(), c.nodeFor(owner, r.Addr()))
		c.patches = append(c.patches, p)
	}
	return c.compact().seal()
}

// compact drops placeholder nodes that no slot references any more, so the
// node table does not grow with redirects.
func (m *Map) compact() *Map {
	used := make([]bool, len(m.nodes))
	for s := range slots.Count {
		used[m.owners.get(s)] = m.assigned
	}
	remap := make([]uint16, len(m.nodes))
	kept := m.nodes[:0:0]
	for i, n := range m.nodes {
		if isPlaceholder(n.ID) && !used[i] {
			continue
		}
		remap[i] = uint16(len(kept))
		kept = append(kept, n)
	}
	if len(kept) == len(m.nodes) {
		return m
	}
	m.nodes = kept
	t := m.owners.own()
	for s, o := range t {
		t[s] = remap[o]
	}
	// No replica set names a placeholder (sets come from slotd alone), so
	// none loses a member.
	var lost slots.Set
	m.replicas = m.replicas.remap(intsOf(remap), &lost)
	return m
}

// intsOf widens a node index remapping for replicaTable.remap.
func intsOf(remap []uint16) []int {
	out := make([]int, len(remap))
	for i, r := range remap {
		out[i] = int(r)
	}
	return out
}

// Equal reports whether two maps have the same version, nodes, owners,
// replica sets and moves in flight (patches aside).
func (m *Map) Equal(o *Map) bool {
	if m.version != o.version || m.clusterID != o.clusterID || m.assigned != o.assigned || len(m.nodes) != len(o.nodes) ||
		!slices.Equal(m.migrations, o.migrations) {
		return false
	}
	for _, n := range m.nodes {
		if on, ok := o.Node(n.ID); !ok || on != n {
			return false
		}
	}
	if !m.assigned {
		return true
	}
	for s := range slots.Count {
		if m.nodes[m.owners.get(s)].ID != o.nodes[o.owners.get(s)].ID || !sameReplicas(m, o, s) {
			return false
		}
	}
	return true
}
