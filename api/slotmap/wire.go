package slotmap

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// Proto returns the compact wire form of m (patches are a client's local
// knowledge and are not encoded).
func (m *Map) Proto() *slotdv1.SlotMap {
	pb := &slotdv1.SlotMap{Version: m.version, ClusterId: m.clusterID}
	pb.Nodes = make([]*slotdv1.Node, len(m.nodes))
	for i, n := range m.nodes {
		pb.Nodes[i] = nodeProto(n)
	}
	pb.Migrations = migrationsProto(m.migrations)
	if !m.assigned {
		return pb
	}
	b := ownerBits(len(m.nodes))
	pb.OwnerBits = uint32(b)
	pb.Owners = packOwners(&m.owners, b)
	pb.Replicas = encodeReplicas(m.replicas)
	return pb
}

// packOwners writes each index as b bits, least significant bit first.
func packOwners(owners *ownerTable, b int) []byte {
	out := make([]byte, slots.Count*b/8)
	var acc uint64 // pending bits, lowest first
	var n, w int   // bits pending, bytes written
	// Whole 32-bit words at a time: slots.Count*b is a multiple of 32, and
	// n stays below 32+16 bits, so the accumulator never overflows.
	for _, o := range owners.flat() {
		acc |= uint64(o) << n
		n += b
		if n >= 32 {
			binary.LittleEndian.PutUint32(out[w:], uint32(acc))
			acc >>= 32
			n -= 32
			w += 4
		}
	}
	return out
}

// FromProto decodes and validates a wire map.
func FromProto(pb *slotdv1.SlotMap) (*Map, error) {
	m := &Map{version: pb.GetVersion(), clusterID: pb.GetClusterId()}
	nodes := make([]Node, len(pb.GetNodes()))
	for i, n := range pb.GetNodes() {
		nodes[i] = nodeFromProto(n)
	}
	if _, err := m.setNodes(nodes); err != nil {
		return nil, err
	}
	ms, err := migrationsFromProto(pb.GetMigrations())
	if err != nil {
		return nil, err
	}
	if pb.GetOwnerBits() == 0 && len(pb.GetOwners()) == 0 {
		if len(pb.GetReplicas()) > 0 {
			return nil, fmt.Errorf("%w: replica sets without owners", ErrInvalid)
		}
		return m.seal(), m.adoptMigrations(ms) // not bootstrapped yet
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: owners without nodes", ErrInvalid)
	}
	b := int(pb.GetOwnerBits())
	if b < ownerBits(len(nodes)) || b > 16 {
		return nil, fmt.Errorf("%w: owner_bits %d cannot index %d nodes", ErrInvalid, b, len(nodes))
	}
	if want := slots.Count * b / 8; len(pb.GetOwners()) != want {
		return nil, fmt.Errorf("%w: owners is %d bytes, want %d for %d bits", ErrInvalid, len(pb.GetOwners()), want, b)
	}
	if err := unpackOwners(&m.owners, pb.GetOwners(), b, len(nodes)); err != nil {
		return nil, err
	}
	m.assigned = true
	if err := m.decodeReplicas(pb.GetReplicas()); err != nil {
		return nil, err
	}
	if err := m.adoptMigrations(ms); err != nil {
		return nil, err
	}
	return m.seal(), nil
}

func unpackOwners(owners *ownerTable, in []byte, b, nodes int) error {
	mask := uint64(1)<<b - 1
	var acc uint64
	var n, r int
	t := owners.own()
	for s := range t {
		if n < b {
			acc |= uint64(binary.LittleEndian.Uint32(in[r:])) << n
			r += 4
			n += 32
		}
		o := acc & mask
		acc >>= b
		n -= b
		if int(o) >= nodes {
			return fmt.Errorf("%w: slot %d: owner index %d, only %d nodes", ErrInvalid, s, o, nodes)
		}
		t[s] = uint16(o)
	}
	return nil
}

// Diff returns the delta that turns from into to. Placeholder nodes from
// redirects are not part of either side's truth and must not be in them:
// Diff is for servers, which never patch.
func Diff(from, to *Map) *slotdv1.MapDelta {
	d := &slotdv1.MapDelta{FromVersion: from.version, Version: to.version}
	// xl translates from's node indexes into to's (-1: removed), so the
	// owner loop compares small integers instead of ids. kept: every node
	// of from is at its own index in to, the usual case (nodes are only
	// appended), found without building maps of ids.
	xl := make([]int, len(from.nodes))
	kept := len(from.nodes) <= len(to.nodes)
	for i := range from.nodes {
		kept = kept && from.nodes[i].ID == to.nodes[i].ID
		xl[i] = i
	}
	var fromIdx, toIdx map[string]int
	if !kept {
		fromIdx, toIdx = from.ids(), to.ids()
	}
	for j, n := range to.nodes {
		i, ok := j, j < len(from.nodes) // where n was in from
		if !kept {
			i, ok = fromIdx[n.ID]
		}
		if !ok || from.nodes[i] != n {
			d.Nodes = append(d.Nodes, nodeProto(n))
		}
	}
	if !kept {
		for i, n := range from.nodes {
			j, ok := toIdx[n.ID]
			if !ok {
				d.RemovedNodes = append(d.RemovedNodes, n.ID)
				j = -1
			}
			xl[i] = j
		}
	}
	if to.assigned {
		tt := to.owners.flat()
		var ft *[slots.Count]uint16
		if from.assigned {
			ft = from.owners.flat()
		}
		// With the indexes kept, the tables compare as they are, a run
		// of diffRun slots at a time: slotd's hub diffs every version, and
		// a version moves a few slots of the 16,384.
		for run := 0; run < slots.Count; run += diffRun {
			if kept && ft != nil && *(*[diffRun]uint16)(ft[run:]) == *(*[diffRun]uint16)(tt[run:]) {
				continue
			}
			for s := run; s < run+diffRun; s++ {
				if o := tt[s]; ft == nil || xl[ft[s]] != int(o) {
					d.Slots = append(d.Slots, &slotdv1.SlotOwner{Slot: uint32(s), Owner: to.nodes[o].ID})
				}
			}
		}
	}
	if to.assigned {
		diffReplicas(d, from, to, kept)
	}
	d.Migrations = migrationsProto(to.migrations)
	return d
}

// diffRun is how many slots Diff compares at once when node indexes match.
const diffRun = 32

// Apply returns the map that delta d produces from m. It fails with ErrGap
// when d does not start at m's version (the caller fetches a full map) and
// with ErrInvalid when d is malformed; m is never changed.
//
// Slots patched by a redirect newer than d keep their patched owner.
//
// Apply is on every watcher's path for every change, so the common delta
// (a few slots, no node removed) copies the Map and records the slots in
// its table of recent changes, not the 32 KiB owner array (see
// ownerTable).
func (m *Map) Apply(d *slotdv1.MapDelta) (*Map, error) {
	if d.GetFromVersion() != m.version {
		return nil, fmt.Errorf("%w: delta %d->%d, map at %d", ErrGap, d.GetFromVersion(), d.GetVersion(), m.version)
	}
	if d.GetVersion() <= m.version {
		return nil, fmt.Errorf("%w: delta %d->%d does not move forward", ErrInvalid, d.GetFromVersion(), d.GetVersion())
	}
	c := m.clone()
	c.version = d.GetVersion()

	// Node table: upserts keep indexes (changed nodes in place, new ones
	// appended); only removals shift them, and then owners are remapped.
	if len(d.GetNodes()) > 0 {
		c.nodes = slices.Clone(c.nodes)
	}
	for _, pn := range d.GetNodes() {
		n := nodeFromProto(pn)
		if n.ID == "" {
			return nil, fmt.Errorf("%w: delta names a node with an empty id", ErrInvalid)
		}
		if i := c.index(n.ID); i >= 0 {
			c.nodes[i] = n
		} else {
			c.nodes = append(c.nodes, n)
		}
	}
	if len(c.nodes) > MaxNodes {
		return nil, fmt.Errorf("%w: %d nodes, limit %d", ErrInvalid, len(c.nodes), MaxNodes)
	}
	// lost marks slots whose owner the delta removes; the delta must
	// reassign every one of them.
	var lost, lostReplica slots.Set
	nlost := 0
	if removed := d.GetRemovedNodes(); len(removed) > 0 {
		remap := make([]int, len(c.nodes))
		kept := make([]Node, 0, len(c.nodes))
		for i, n := range c.nodes {
			if slices.Contains(removed, n.ID) {
				remap[i] = -1
				continue
			}
			remap[i] = len(kept)
			kept = append(kept, n)
		}
		if c.assigned {
			t := c.owners.own()
			for s, o := range t {
				if r := remap[o]; r >= 0 {
					t[s] = uint16(r)
				} else {
					lost.Add(slots.MustNew(s))
					nlost++
					t[s] = 0
				}
			}
		}
		c.replicas = c.replicas.remap(remap, &lostReplica)
		c.nodes = kept
	}
	if len(c.patches) > 0 {
		c.patches = slices.DeleteFunc(c.patches, func(p patch) bool { return p.version <= c.version || lost.Contains(p.slot) })
	}

	// Owner lookups: a linear scan beats building a map for small deltas.
	var idx map[string]uint16
	if len(d.GetSlots())+len(d.GetReplicas()) > 16 && len(c.nodes) > 8 {
		idx = make(map[string]uint16, len(c.nodes))
		for i, n := range c.nodes {
			idx[n.ID] = uint16(i)
		}
	}
	var assigned slots.Set
	nassigned := 0
	for _, so := range d.GetSlots() {
		s, err := slots.New(int(so.GetSlot()))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		i, ok := -1, false
		if idx != nil {
			var u uint16
			u, ok = idx[so.GetOwner()]
			i = int(u)
		} else {
			i = c.index(so.GetOwner())
			ok = i >= 0
		}
		if !ok {
			return nil, fmt.Errorf("%w: slot %d: owner %q is not in the node table", ErrInvalid, s.Int(), so.GetOwner())
		}
		if !assigned.Contains(s) {
			assigned.Add(s)
			nassigned++
		}
		if !c.patched(s) {
			c.owners.set(s.Int(), uint16(i))
		}
	}
	if !m.assigned && nassigned > 0 && nassigned != slots.Count {
		return nil, fmt.Errorf("%w: the first assignment names %d slots, want all %d", ErrInvalid, nassigned, slots.Count)
	}
	if nlost > 0 {
		for s := range lost.All() {
			if !assigned.Contains(s) {
				return nil, fmt.Errorf("%w: slot %d: its owner is removed and the delta gives it no new one", ErrInvalid, s.Int())
			}
		}
	}
	c.assigned = m.assigned || nassigned > 0
	if err := c.applyReplicas(d.GetReplicas(), &lostReplica, func(id string) (uint16, bool) {
		if idx != nil {
			i, ok := idx[id]
			return i, ok
		}
		i := c.index(id)
		return uint16(i), i >= 0
	}); err != nil {
		return nil, err
	}
	if c.replicas != nil {
		// A slot whose owner the delta changed and whose set it left as it
		// was must not now name its owner among its other replicas.
		for s := range assigned.All() {
			if r, ok := c.replicas.get(s.Int()); ok && !c.patched(s) {
				if err := c.checkRec(s.Int(), r); err != nil {
					return nil, err
				}
			}
		}
	}
	ms, err := migrationsFromProto(d.GetMigrations())
	if err != nil {
		return nil, err
	}
	if err := c.adoptMigrations(ms); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(c.nodes, func(n Node) bool { return isPlaceholder(n.ID) }) {
		c = c.compact()
	}
	return c.seal(), nil
}

// ids maps node ids to indexes.
func (m *Map) ids() map[string]int {
	idx := make(map[string]int, len(m.nodes))
	for i, n := range m.nodes {
		idx[n.ID] = i
	}
	return idx
}

func (m *Map) patched(s slots.Slot) bool {
	for _, p := range m.patches {
		if p.slot == s {
			return true
		}
	}
	return false
}

func nodeProto(n Node) *slotdv1.Node {
	return &slotdv1.Node{Id: n.ID, Address: n.Addr, Zone: n.Zone, Weight: n.Weight, State: n.State}
}

func nodeFromProto(p *slotdv1.Node) Node {
	return Node{ID: p.GetId(), Addr: p.GetAddress(), Zone: p.GetZone(), Weight: p.GetWeight(), State: p.GetState()}
}

func migrationsProto(ms []Migration) []*slotdv1.Migration {
	if len(ms) == 0 {
		return nil
	}
	out := make([]*slotdv1.Migration, len(ms))
	for i, mg := range ms {
		out[i] = &slotdv1.Migration{Slot: uint32(mg.Slot.Uint16()), From: mg.From, To: mg.To, Phase: mg.Phase, MoveId: mg.MoveID}
	}
	return out
}

func migrationsFromProto(ps []*slotdv1.Migration) ([]Migration, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	out := make([]Migration, len(ps))
	for i, p := range ps {
		s, err := slots.New(int(p.GetSlot()))
		if err != nil {
			return nil, fmt.Errorf("%w: move in flight: %v", ErrInvalid, err)
		}
		out[i] = Migration{Slot: s, From: p.GetFrom(), To: p.GetTo(), Phase: p.GetPhase(), MoveID: p.GetMoveId()}
	}
	return out, nil
}
