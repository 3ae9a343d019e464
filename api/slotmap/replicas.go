package slotmap

import (
	"fmt"
	"slices"

	"github.com/slotd/slotd/slots"
)

// ReplicaSet is one slot's replicas at a map's version
// (docs/replication.md, "Model").
type ReplicaSet struct {
	Slot slots.Slot
	// Epoch is the version at which a replica step last changed the slot's
	// primary or in-sync set; 0 while none has since the slot's last owner
	// change (whose version the map does not carry).
	Epoch uint64
	// ISR holds the in-sync replicas, the primary (the slot's owner) first.
	ISR []string
	// Learners are replicas being filled, not in sync yet: never read from.
	Learners []string
}

// Primary returns the slot's primary, "" for a set of a map without owners.
func (r ReplicaSet) Primary() string {
	if len(r.ISR) == 0 {
		return ""
	}
	return r.ISR[0]
}

// Replica is an in-sync replica of a slot, for a read that may use one.
type Replica struct {
	ID, Addr, Zone string
	// Primary is set on the slot's primary, which serves writes.
	Primary bool
}

// HasReplicas reports whether any slot has a set other than its owner
// alone at epoch 0 (a map at rf 1 has none).
func (m *Map) HasReplicas() bool { return !m.replicas.empty() }

// ReplicaSet returns slot s's set: its stored one, or its owner alone at
// epoch 0. A slot patched by a redirect (WithOwner) is its new owner alone
// until an update at or past the redirect's version: what the map knew of
// its other replicas is older than that. Empty on a map without owners.
func (m *Map) ReplicaSet(s slots.Slot) ReplicaSet {
	if !m.assigned {
		return ReplicaSet{Slot: s}
	}
	owner := m.owners.get(s.Int())
	out := ReplicaSet{Slot: s, ISR: []string{m.nodes[owner].ID}}
	r, ok := m.replicas.get(s.Int())
	if !ok || m.patched(s) {
		return out
	}
	out.Epoch = r.epoch
	for _, idx := range r.followers {
		out.ISR = append(out.ISR, m.nodes[idx].ID)
	}
	for _, idx := range r.learners {
		out.Learners = append(out.Learners, m.nodes[idx].ID)
	}
	return out
}

// ReplicaSets returns every slot's set that is not its owner alone at
// epoch 0, in slot order.
func (m *Map) ReplicaSets() []ReplicaSet {
	var out []ReplicaSet
	m.replicas.each(func(s int, _ replicaRec) {
		if sl := slots.MustNew(s); !m.patched(sl) {
			out = append(out, m.ReplicaSet(sl))
		}
	})
	return out
}

// Replicas returns slot s's in-sync replicas, those in zone first, then
// the others, each group in ISR order (the primary first): the order in
// which a read that may use a replica should try them. Learners are never
// returned: their data is not complete. A zone of "" orders the ISR as it
// is. Nil on a map without owners. It allocates the slice it returns.
func (m *Map) Replicas(s slots.Slot, zone string) []Replica {
	if !m.assigned {
		return nil
	}
	owner := m.owners.get(s.Int())
	isr := []uint16{owner}
	if r, ok := m.replicas.get(s.Int()); ok && !m.patched(s) {
		isr = append(isr, r.followers...)
	}
	out := make([]Replica, 0, len(isr))
	for _, near := range []bool{true, false} {
		for _, idx := range isr {
			if n := &m.nodes[idx]; (zone != "" && n.Zone == zone) == near {
				out = append(out, Replica{ID: n.ID, Addr: n.Addr, Zone: n.Zone, Primary: idx == owner})
			}
		}
	}
	return out
}

// setReplicasOf builds m's table from a snapshot's sets, once the owner
// table is set.
func (m *Map) setReplicasOf(s Snapshot, idx map[string]uint16) error {
	if s.EachReplicaSet == nil {
		return m.setReplicas(s.Replicas, idx)
	}
	tb := newTableBuilder()
	next := 0
	var bad error
	s.EachReplicaSet(func(sl slots.Slot, epoch uint64, isr, learners []uint16) {
		n := sl.Int()
		switch {
		case bad != nil:
			return
		case n < next:
			bad = fmt.Errorf("%w: replica set of slot %d out of slot order", ErrInvalid, n)
		case len(isr) == 0 || isr[0] != m.owners.get(n):
			bad = fmt.Errorf("%w: slot %d: the replica set's primary is not the owner", ErrInvalid, n)
		default:
			r := replicaRec{epoch: epoch, followers: isr[1:], learners: learners}
			if bad = m.checkRec(n, r); bad == nil {
				tb.add(n, r)
			}
		}
		next = n + 1
	})
	if bad != nil {
		return bad
	}
	m.replicas = tb.done()
	return nil
}

// setReplicas builds m's table from a snapshot's sets, by node id (idx),
// once the owner table is set.
func (m *Map) setReplicas(sets []ReplicaSet, idx map[string]uint16) error {
	if len(sets) == 0 {
		return nil
	}
	if !m.assigned {
		return fmt.Errorf("%w: replica sets without owners", ErrInvalid)
	}
	if idx == nil {
		idx = make(map[string]uint16, len(m.nodes))
		for i, n := range m.nodes {
			idx[n.ID] = uint16(i)
		}
	}
	edits := make([]replicaEdit, 0, len(sets))
	for _, rs := range sets {
		s := rs.Slot.Int()
		if len(rs.ISR) == 0 {
			return fmt.Errorf("%w: slot %d: a replica set without a primary", ErrInvalid, s)
		}
		if owner := m.nodes[m.owners.get(s)].ID; rs.ISR[0] != owner {
			return fmt.Errorf("%w: slot %d: primary %q is not the owner %q", ErrInvalid, s, rs.ISR[0], owner)
		}
		r := replicaRec{epoch: rs.Epoch}
		var err error
		if r.followers, err = indexesOf(rs.ISR[1:], idx); err != nil {
			return fmt.Errorf("%w: slot %d: %v", ErrInvalid, s, err)
		}
		if r.learners, err = indexesOf(rs.Learners, idx); err != nil {
			return fmt.Errorf("%w: slot %d: %v", ErrInvalid, s, err)
		}
		edits = append(edits, replicaEdit{slot: s, rec: r})
	}
	slices.SortFunc(edits, func(a, b replicaEdit) int { return a.slot - b.slot })
	for i := 1; i < len(edits); i++ {
		if edits[i].slot == edits[i-1].slot {
			return fmt.Errorf("%w: slot %d has two replica sets", ErrInvalid, edits[i].slot)
		}
	}
	for _, e := range edits {
		if err := m.checkRec(e.slot, e.rec); err != nil {
			return err
		}
	}
	m.replicas = m.replicas.with(edits)
	return nil
}

func indexesOf(ids []string, idx map[string]uint16) ([]uint16, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out := make([]uint16, len(ids))
	for i, id := range ids {
		j, ok := idx[id]
		if !ok {
			return nil, fmt.Errorf("replica %q is not in the node table", id)
		}
		out[i] = j
	}
	return out, nil
}

// checkRec validates slot s's set against m's node and owner tables:
// bounded lists of distinct known nodes, none of them the owner.
func (m *Map) checkRec(s int, r replicaRec) error {
	if len(r.followers) > MaxReplicaList || len(r.learners) > MaxReplicaList {
		return fmt.Errorf("%w: slot %d: %d followers and %d learners, limit %d each", ErrInvalid, s, len(r.followers), len(r.learners), MaxReplicaList)
	}
	owner := m.owners.get(s)
	var seen [MaxReplicaList * 2]uint16
	n := 0
	for _, list := range [][]uint16{r.followers, r.learners} {
		for _, idx := range list {
			if int(idx) >= len(m.nodes) {
				return fmt.Errorf("%w: slot %d: replica index %d, only %d nodes", ErrInvalid, s, idx, len(m.nodes))
			}
			if idx == owner {
				return fmt.Errorf("%w: slot %d: its primary %q is listed again among its replicas", ErrInvalid, s, m.nodes[idx].ID)
			}
			if slices.Contains(seen[:n], idx) {
				return fmt.Errorf("%w: slot %d: node %q appears twice in its replica set", ErrInvalid, s, m.nodes[idx].ID)
			}
			seen[n] = idx
			n++
		}
	}
	return nil
}

// sameReplicas reports whether slot s has the same set in a and b, by node
// id (their node tables may differ).
func sameReplicas(a, b *Map, s int) bool {
	ra, oka := a.replicas.get(s)
	rb, okb := b.replicas.get(s)
	if oka != okb {
		return false
	}
	if !oka {
		return true
	}
	return ra.epoch == rb.epoch && sameIDs(a, ra.followers, b, rb.followers) && sameIDs(a, ra.learners, b, rb.learners)
}

func sameIDs(a *Map, x []uint16, b *Map, y []uint16) bool {
	return slices.EqualFunc(x, y, func(i, j uint16) bool { return a.nodes[i].ID == b.nodes[j].ID })
}
