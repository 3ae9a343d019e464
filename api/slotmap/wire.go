package slotmap

import (
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
	return pb
}

// packOwners writes each index as b bits, least significant bit first.
func packOwners(owners *[slots.Count]uint16, b int) []byte {
	out := make([]byte, slots.Count*b/8)
	var acc uint64 // pending bits, lowest first
	var n, w int   // bits pending, bytes written
	for _, o := range owners {
		acc |= uint64(o) << n
		n += b
		for n >= 8 {
			out[w] = byte(acc)
			acc >>= 8
			n -= 8
			w++
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
		return m, m.setMigrations(ms) // not bootstrapped yet
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
	if err := m.setMigrations(ms); err != nil {
		return nil, err
	}
	return m, nil
}

func unpackOwners(owners *[slots.Count]uint16, in []byte, b, nodes int) error {
	mask := uint64(1)<<b - 1
	var acc uint64
	var n, r int
	for s := range owners {
		for n < b {
			acc |= uint64(in[r]) << n
			r++
			n += 8
		}
		o := acc & mask
		acc >>= b
		n -= b
		if int(o) >= nodes {
			return fmt.Errorf("%w: slot %d: owner index %d, only %d nodes", ErrInvalid, s, o, nodes)
		}
		owners[s] = uint16(o)
	}
	return nil
}

// Diff returns the delta that turns from into to. Placeholder nodes from
// redirects are not part of either side's truth and must not be in them:
// Diff is for servers, which never patch.
func Diff(from, to *Map) *slotdv1.MapDelta {
	d := &slotdv1.MapDelta{FromVersion: from.version, Version: to.version}
	for _, n := range to.nodes {
		if old, ok := from.Node(n.ID); !ok || old != n {
			d.Nodes = append(d.Nodes, nodeProto(n))
		}
	}
	for _, n := range from.nodes {
		if to.index(n.ID) < 0 {
			d.RemovedNodes = append(d.RemovedNodes, n.ID)
		}
	}
	if to.assigned {
		for s := range slots.Count {
			owner := to.nodes[to.owners[s]].ID
			if !from.assigned || from.nodes[from.owners[s]].ID != owner {
				d.Slots = append(d.Slots, &slotdv1.SlotOwner{Slot: uint32(s), Owner: owner})
			}
		}
	}
	d.Migrations = migrationsProto(to.migrations)
	return d
}

// Apply returns the map that delta d produces from m. It fails with ErrGap
// when d does not start at m's version (the caller fetches a full map) and
// with ErrInvalid when d is malformed; m is never changed.
//
// Slots patched by a redirect newer than d keep their patched owner.
func (m *Map) Apply(d *slotdv1.MapDelta) (*Map, error) {
	if d.GetFromVersion() != m.version {
		return nil, fmt.Errorf("%w: delta %d->%d, map at %d", ErrGap, d.GetFromVersion(), d.GetVersion(), m.version)
	}
	if d.GetVersion() <= m.version {
		return nil, fmt.Errorf("%w: delta %d->%d does not move forward", ErrInvalid, d.GetFromVersion(), d.GetVersion())
	}
	c := m.clone()
	c.version = d.GetVersion()

	// Node table: removals, then upserts by id. Removing shifts indexes, so
	// owners are remapped through ids.
	ids := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		ids[i] = n.ID
	}
	nodes := c.nodes[:0:0]
	for _, n := range c.nodes {
		if !slices.Contains(d.GetRemovedNodes(), n.ID) {
			nodes = append(nodes, n)
		}
	}
	for _, pn := range d.GetNodes() {
		n := nodeFromProto(pn)
		if i := slices.IndexFunc(nodes, func(x Node) bool { return x.ID == n.ID }); i >= 0 {
			nodes[i] = n
		} else {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) > MaxNodes {
		return nil, fmt.Errorf("%w: %d nodes, limit %d", ErrInvalid, len(nodes), MaxNodes)
	}
	idx := make(map[string]uint16, len(nodes))
	for i, n := range nodes {
		if n.ID == "" {
			return nil, fmt.Errorf("%w: delta names a node with an empty id", ErrInvalid)
		}
		idx[n.ID] = uint16(i)
	}
	// lost marks slots whose owner the delta removes; the delta must
	// reassign every one of them.
	var owners [slots.Count]uint16
	var lost slots.Set
	if m.assigned {
		for s, o := range c.owners {
			i, ok := idx[ids[o]]
			if !ok {
				lost.Add(slots.MustNew(s))
			}
			owners[s] = i
		}
	}
	patched := make(map[slots.Slot]bool, len(c.patches))
	c.patches = slices.DeleteFunc(c.patches, func(p patch) bool { return p.version <= c.version || lost.Contains(p.slot) })
	for _, p := range c.patches {
		patched[p.slot] = true
	}
	var assigned slots.Set
	for _, so := range d.GetSlots() {
		s, err := slots.New(int(so.GetSlot()))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		i, ok := idx[so.GetOwner()]
		if !ok {
			return nil, fmt.Errorf("%w: slot %d: owner %q is not in the node table", ErrInvalid, s.Int(), so.GetOwner())
		}
		assigned.Add(s)
		if !patched[s] {
			owners[s.Int()] = i
		}
	}
	for s := range slots.Count {
		sl := slots.MustNew(s)
		if assigned.Contains(sl) {
			continue
		}
		if !m.assigned && len(d.GetSlots()) > 0 {
			// The bootstrap delta must name every slot.
			return nil, fmt.Errorf("%w: slot %d has no owner", ErrInvalid, s)
		}
		if lost.Contains(sl) {
			return nil, fmt.Errorf("%w: slot %d: its owner is removed and the delta gives it no new one", ErrInvalid, s)
		}
	}
	c.nodes, c.owners = nodes, owners
	c.assigned = m.assigned || len(d.GetSlots()) > 0
	ms, err := migrationsFromProto(d.GetMigrations())
	if err != nil {
		return nil, err
	}
	if err := c.setMigrations(ms); err != nil {
		return nil, err
	}
	return c.compact(), nil
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
