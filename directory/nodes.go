package directory

import (
	"context"
	"fmt"
)

// RegisterNode adds a node, or returns the existing one when a node with the
// same id, zone and weight is already registered (a restarted node may call
// it again; a changed address is updated). A different zone or weight for an
// existing id is ErrPrecondition: those change placement and go through
// SetWeight or remove-and-register. A new node is active, and counts as
// alive for DownAfter before its first heartbeat. It works before Bootstrap.
func (d *Directory) RegisterNode(ctx context.Context, n Node) (*Node, error) {
	if err := checkNode(n); err != nil {
		return nil, fmt.Errorf("register node: %w", err)
	}
	var out Node
	_, err := d.update(ctx, "register node "+n.ID, updateOpts{}, func(st *state, m *mutation) error {
		if old, ok := st.nodes[n.ID]; ok {
			if err := st.checkNodeZone(n.ID, n.Zone); err != nil {
				return err
			}
			if old.Zone != n.Zone || old.Weight != n.Weight {
				return fmt.Errorf("%w: node %q is registered with zone %q weight %d, not zone %q weight %d; use set-weight, or remove it first",
					ErrPrecondition, n.ID, old.Zone, old.Weight, n.Zone, n.Weight)
			}
			if old.Addr != n.Addr {
				m.change = Change{Kind: ChangeNodeAddr, Node: n.ID, Reason: "re-registered with address " + n.Addr}
				old.Addr = n.Addr
				m.node(n.ID)
			}
			out = old.node()
			return nil
		}
		rec, err := d.insertNode(st, m, n)
		if err != nil {
			return err
		}
		out = rec.node()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// editNode applies edit to an existing node in one update. edit returns the
// change to record, or ok=false for a no-op.
func (d *Directory) editNode(ctx context.Context, op, id string, edit func(st *state, n *nodeRec) (Change, bool, error)) (uint64, error) {
	if err := checkID("node id", id); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return d.update(ctx, op+" "+id, updateOpts{}, func(st *state, m *mutation) error {
		n, ok := st.nodes[id]
		if !ok {
			return fmt.Errorf("%w: node %q is not registered", ErrNotFound, id)
		}
		c, changed, err := edit(st, n)
		if err != nil || !changed {
			return err
		}
		c.Node = id
		m.change = c
		m.node(id)
		return nil
	})
}

// UpdateAddr changes the address of a node. It returns the new version.
func (d *Directory) UpdateAddr(ctx context.Context, id, addr, by string) (uint64, error) {
	if err := checkAddr(addr); err != nil {
		return 0, fmt.Errorf("update address of %q: %w", id, err)
	}
	return d.editNode(ctx, "update address of", id, func(_ *state, n *nodeRec) (Change, bool, error) {
		if n.Addr == addr {
			return Change{}, false, nil
		}
		old := n.Addr
		n.Addr = addr
		return Change{Kind: ChangeNodeAddr, Reason: fmt.Sprintf("address %s -> %s", old, addr), By: by}, true, nil
	})
}

// SetWeight changes the weight of a node. It moves no slot: the planner
// reads weights. It returns the new version.
func (d *Directory) SetWeight(ctx context.Context, id string, weight int, by string) (uint64, error) {
	if err := checkWeight(weight); err != nil {
		return 0, fmt.Errorf("set weight of %q: %w", id, err)
	}
	return d.editNode(ctx, "set weight of", id, func(_ *state, n *nodeRec) (Change, bool, error) {
		if n.Weight == weight {
			return Change{}, false, nil
		}
		old := n.Weight
		n.Weight = weight
		return Change{Kind: ChangeNodeWeight, Reason: fmt.Sprintf("weight %d -> %d", old, weight), By: by}, true, nil
	})
}

// Drain marks a node draining: it receives no more slots, and the planner
// moves its slots away. Draining a draining node is a no-op. It returns the
// new version.
func (d *Directory) Drain(ctx context.Context, id, reason, by string) (uint64, error) {
	if err := checkText(reason, by); err != nil {
		return 0, fmt.Errorf("drain %q: %w", id, err)
	}
	return d.editNode(ctx, "drain", id, func(_ *state, n *nodeRec) (Change, bool, error) {
		if n.Draining {
			return Change{}, false, nil
		}
		n.Draining = true
		return Change{Kind: ChangeNodeDrain, Reason: reason, By: by}, true, nil
	})
}

// Undrain cancels Drain. It returns the new version.
func (d *Directory) Undrain(ctx context.Context, id, reason, by string) (uint64, error) {
	if err := checkText(reason, by); err != nil {
		return 0, fmt.Errorf("undrain %q: %w", id, err)
	}
	return d.editNode(ctx, "undrain", id, func(st *state, n *nodeRec) (Change, bool, error) {
		if !n.Draining {
			return Change{}, false, nil
		}
		if err := st.checkNodeZone(n.ID, n.Zone); err != nil {
			return Change{}, false, err
		}
		n.Draining = false
		return Change{Kind: ChangeNodeUndrain, Reason: reason, By: by}, true, nil
	})
}

// RemoveNode deletes a node that owns no slot and takes part in no move
// (ErrPrecondition otherwise: drain it and let the mover empty it first).
// It returns the new version.
func (d *Directory) RemoveNode(ctx context.Context, id, reason, by string) (uint64, error) {
	if err := checkID("node id", id); err != nil {
		return 0, fmt.Errorf("remove node: %w", err)
	}
	if err := checkText(reason, by); err != nil {
		return 0, fmt.Errorf("remove node %q: %w", id, err)
	}
	return d.update(ctx, "remove node "+id, updateOpts{}, func(st *state, m *mutation) error {
		n, ok := st.nodes[id]
		if !ok {
			return fmt.Errorf("%w: node %q is not registered", ErrNotFound, id)
		}
		owned := 0
		for _, o := range st.owners {
			if o == n.Index {
				owned++
			}
		}
		if owned > 0 {
			return fmt.Errorf("%w: node %q still owns %d slots; drain it and move them first", ErrPrecondition, id, owned)
		}
		if held, _ := st.replicaSlots(n.Index); held > 0 {
			return fmt.Errorf("%w: node %q still holds replicas of %d slots; drain it and move them first", ErrPrecondition, id, held)
		}
		for s, mv := range st.moves {
			if mv.From == id || mv.To == id {
				return fmt.Errorf("%w: node %q takes part in move %s of slot %d; commit or abort it first", ErrPrecondition, id, mv.MoveID, s)
			}
		}
		delete(st.nodes, id)
		m.node(id)
		m.change = Change{Kind: ChangeNodeRemove, Node: id, Reason: reason, By: by}
		return nil
	})
}

// insertNode registers n, new to st, at a free index, as m's change.
func (d *Directory) insertNode(st *state, m *mutation, n Node) (*nodeRec, error) {
	if err := st.checkNodeZone(n.ID, n.Zone); err != nil {
		return nil, err
	}
	idx, ok := st.freeIndex()
	if !ok {
		return nil, fmt.Errorf("%w: %d nodes are registered, the most the table can index", ErrPrecondition, maxNodes)
	}
	now := d.cfg.Now().UTC()
	rec := &nodeRec{ID: n.ID, Index: idx, Addr: n.Addr, Zone: n.Zone, Weight: n.Weight, StateSince: now, Registered: now}
	st.nodes[n.ID] = rec
	m.node(n.ID)
	m.change = Change{Kind: ChangeNodeRegister, Node: n.ID, Reason: fmt.Sprintf("addr %s zone %q weight %d", n.Addr, n.Zone, n.Weight)}
	return rec, nil
}
