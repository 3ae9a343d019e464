package node

import (
	"sync"

	"github.com/slotd/slotd/api/slotmap"

	"github.com/slotd/slotd/slots"
)

// Owner is what a slot map says about one slot.
type Owner struct {
	ID      string // owning node's id
	Addr    string // owning node's address for clients
	Version uint64 // version of the map that says so
}

// MapSource tells a node who owns each slot. The SDK's map cache, kept fresh
// by its watch on slotd, is the usual source; StaticMap serves tests and
// single-node setups. Owner must be cheap: it runs on every request.
type MapSource interface {
	// Owner returns the owner of slot in the newest map the source holds;
	// ok is false while it holds no map yet.
	Owner(slot slots.Slot) (o Owner, ok bool)
}

// StaticMap is a MapSource set by hand. Every change bumps its version, as
// the directory would. It is safe for concurrent use; the zero value holds no
// map until the first Set.
type StaticMap struct {
	mu      sync.RWMutex // guards everything below
	loaded  bool
	version uint64
	owner   [slots.Count]uint16 // index into nodes
	nodes   []Owner             // Version unused here
	moves   []slotmap.Migration
}

var _ MapSource = (*StaticMap)(nil)

// SetAll makes one node the owner of every slot.
func (m *StaticMap) SetAll(id, addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes = []Owner{{ID: id, Addr: addr}}
	m.owner = [slots.Count]uint16{}
	m.loaded = true
	m.version++
}

// Set makes node id at addr the owner of the given slots.
func (m *StaticMap) Set(id, addr string, ss ...slots.Slot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := -1
	for j, o := range m.nodes {
		if o.ID == id {
			i = j
			m.nodes[j].Addr = addr
		}
	}
	if i < 0 {
		m.nodes = append(m.nodes, Owner{ID: id, Addr: addr})
		i = len(m.nodes) - 1
	}
	for _, s := range ss {
		m.owner[s.Int()] = uint16(i)
	}
	m.loaded = true
	m.version++
}

// Version returns the current version, 0 before the first Set.
func (m *StaticMap) Version() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.version
}

// Owner implements MapSource.
func (m *StaticMap) Owner(s slots.Slot) (Owner, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.loaded || len(m.nodes) == 0 {
		return Owner{}, false
	}
	o := m.nodes[m.owner[s.Int()]]
	o.Version = m.version
	return o, true
}

// SetMigrations replaces the moves in flight the map shows (for
// reconciliation tests); it bumps the version like any change.
func (m *StaticMap) SetMigrations(ms ...slotmap.Migration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.moves = append([]slotmap.Migration(nil), ms...)
	m.version++
}

// Map implements WholeMap: the map at the current version, nil before the
// first Set or when its content does not make a valid map.
func (m *StaticMap) Map() *slotmap.Map {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.loaded || len(m.nodes) == 0 {
		return nil
	}
	snap := slotmap.Snapshot{Version: m.version, ClusterID: "static", Owners: make([]string, slots.Count), Migrations: m.moves}
	for _, o := range m.nodes {
		snap.Nodes = append(snap.Nodes, slotmap.Node{ID: o.ID, Addr: o.Addr, Weight: 1})
	}
	for i, idx := range m.owner {
		snap.Owners[i] = m.nodes[idx].ID
	}
	mp, err := slotmap.New(snap)
	if err != nil {
		return nil
	}
	return mp
}
