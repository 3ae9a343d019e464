package directory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/slotd/slotd/ringcompat"
)

// Bootstrap creates the slot table: the owners of all slots come from
// ringcompat.InitialAssignment over nodes with vnodes points per unit of
// weight (0 means ringcompat.DefaultVNodes), so the same nodes give the same
// table anywhere. Nodes not yet registered are registered; registered ones
// must match (zone, weight). An empty nodes list means every registered
// node that is not draining or down. New nodes get indexes in id order. It
// returns the table read right after; ErrAlreadyBootstrapped when a table
// exists.
// maxBootstrapNodesInTxn is how many new nodes the bootstrap transaction
// registers itself: 64 chunks + version + history + trim + these < 128.
const maxBootstrapNodesInTxn = 48

func (d *Directory) Bootstrap(ctx context.Context, nodes []Node, vnodes int, by string) (*Snapshot, error) {
	if vnodes == 0 {
		vnodes = ringcompat.DefaultVNodes
	}
	if vnodes < 0 || vnodes > maxVNodes {
		return nil, fmt.Errorf("bootstrap: %w: vnodes %d is not in 1-%d", ErrInvalid, vnodes, maxVNodes)
	}
	if err := checkText("", by); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if err := checkNode(n); err != nil {
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		if seen[n.ID] {
			return nil, fmt.Errorf("bootstrap: %w: node %q is listed twice", ErrInvalid, n.ID)
		}
		seen[n.ID] = true
	}
	// etcd takes at most 128 operations per transaction (its default
	// --max-txn-ops), and the bootstrap txn writes the 64 owner chunks, the
	// version and history. With more new nodes than fit beside them, the
	// nodes are registered first, one change each.
	if len(nodes) > maxBootstrapNodesInTxn {
		st, _, err := d.read(ctx)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		if st.bootstrapped() {
			return nil, fmt.Errorf("bootstrap: %w at version %d", ErrAlreadyBootstrapped, st.version)
		}
		for _, n := range nodes {
			if _, ok := st.nodes[n.ID]; ok {
				continue
			}
			if _, err := d.RegisterNode(ctx, n); err != nil {
				return nil, fmt.Errorf("bootstrap: register %s: %w", n.ID, err)
			}
		}
	}
	_, err := d.update(ctx, "bootstrap", updateOpts{}, func(st *state, m *mutation) error {
		if st.bootstrapped() {
			return fmt.Errorf("%w at version %d", ErrAlreadyBootstrapped, st.version)
		}
		members := slices.Clone(nodes)
		if len(members) == 0 {
			for _, id := range slices.Sorted(maps.Keys(st.nodes)) {
				if n := st.nodes[id]; n.state() == NodeActive {
					members = append(members, n.node())
				}
			}
			if len(members) == 0 {
				return fmt.Errorf("%w: no nodes given and no active node registered", ErrInvalid)
			}
		}
		slices.SortFunc(members, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
		now := d.cfg.Now().UTC()
		ring := make([]ringcompat.Node, len(members))
		for i, n := range members {
			ring[i] = ringcompat.Node{ID: n.ID, Weight: n.Weight, Zone: n.Zone}
			if old, ok := st.nodes[n.ID]; ok {
				if old.Zone != n.Zone || old.Weight != n.Weight {
					return fmt.Errorf("%w: node %q is registered with zone %q weight %d, not zone %q weight %d",
						ErrPrecondition, n.ID, old.Zone, old.Weight, n.Zone, n.Weight)
				}
				if old.state() != NodeActive {
					return fmt.Errorf("%w: node %q is %s", ErrPrecondition, n.ID, old.state())
				}
				continue
			}
			idx, ok := st.freeIndex()
			if !ok {
				return fmt.Errorf("%w: too many nodes", ErrPrecondition)
			}
			st.nodes[n.ID] = &nodeRec{ID: n.ID, Index: idx, Addr: n.Addr, Zone: n.Zone, Weight: n.Weight, StateSince: now, Registered: now}
			m.node(n.ID)
		}
		owners, err := ringcompat.InitialAssignment(ring, vnodes)
		if err != nil {
			return fmt.Errorf("%w: initial assignment: %w", ErrInvalid, err)
		}
		for s, id := range owners {
			st.owners[s] = st.nodes[id].Index
		}
		for c := range chunks {
			m.chunks[c] = true
		}
		m.change = Change{Kind: ChangeBootstrap, Reason: fmt.Sprintf("%d nodes, %d vnodes per weight", len(members), vnodes), By: by}
		return nil
	})
	if err != nil {
		return nil, err
	}
	d.lg.Info("directory bootstrapped", "nodes", len(nodes), "vnodes", vnodes, "by", by)
	return d.Snapshot(ctx)
}
