package directory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// AddNode registers a node for an operator. Unlike RegisterNode (a store
// re-registering after a restart may have moved), it never re-points a
// node: an id registered at another address, or an address another node
// has, is ErrPrecondition, and the message says what each node owns, so
// that an operator who mistyped sees what the change would have broken.
// Adding a node exactly as it is registered (address, zone, weight) is a
// no-op and returns added=false. The check and the registration are one
// transaction. It works before Bootstrap.
func (d *Directory) AddNode(ctx context.Context, n Node) (*Node, bool, error) {
	if err := checkNode(n); err != nil {
		return nil, false, fmt.Errorf("add node: %w", err)
	}
	var out Node
	added := false
	_, err := d.update(ctx, "add node "+n.ID, updateOpts{}, func(st *state, m *mutation) error {
		var refusals []string
		if old, ok := st.nodes[n.ID]; ok {
			if old.Addr != n.Addr {
				refusals = append(refusals, fmt.Sprintf("node %s is registered at %s and %s; change its address with: slotctl nodes set-addr %s %s",
					n.ID, old.Addr, st.owns(old), n.ID, n.Addr))
			} else if old.Zone != n.Zone || old.Weight != n.Weight {
				refusals = append(refusals, fmt.Sprintf("node %s is registered with zone %q weight %d and %s; change a weight with slotctl nodes weight",
					n.ID, old.Zone, old.Weight, st.owns(old)))
			}
		}
		for _, id := range slices.Sorted(maps.Keys(st.nodes)) {
			if o := st.nodes[id]; id != n.ID && o.Addr == n.Addr {
				refusals = append(refusals, fmt.Sprintf("address %s is node %s's, which %s", n.Addr, id, st.owns(o)))
			}
		}
		if len(refusals) > 0 {
			return fmt.Errorf("%w: %s; nothing changed", ErrPrecondition, strings.Join(refusals, "; "))
		}
		if old, ok := st.nodes[n.ID]; ok {
			out = old.node()
			return nil
		}
		rec, err := d.insertNode(st, m, n)
		if err != nil {
			return err
		}
		out, added = rec.node(), true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return &out, added, nil
}

// owns says in a few words what node n owns: its slots and moves in flight.
func (st *state) owns(n *nodeRec) string {
	owned := 0
	for _, o := range st.owners {
		if o == n.Index {
			owned++
		}
	}
	moves := 0
	for _, mv := range st.moves {
		if mv.From == n.ID || mv.To == n.ID {
			moves++
		}
	}
	s := fmt.Sprintf("owns %d slots", owned)
	if owned == 1 {
		s = "owns 1 slot"
	}
	if moves > 0 {
		s += fmt.Sprintf(" and takes part in %d moves in flight", moves)
	}
	return s
}
