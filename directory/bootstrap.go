package directory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/slotd/slotd/ringcompat"
)

// maxBootstrapNodesInTxn is how many new nodes the bootstrap transaction
// registers itself: 64 chunks + version + history + trim + these < 128.
const maxBootstrapNodesInTxn = 48

// ChangeBootstrapReplicas records the replica sets a bootstrap at rf > 1
// writes just before the owners: the two do not fit one transaction.
const ChangeBootstrapReplicas = "bootstrap-replicas"

// errSetsChanged: the replica sets written ahead of a bootstrap are not
// the ones its owners need (the nodes or the policy changed in between).
var errSetsChanged = fmt.Errorf("%w: the replica sets written for the bootstrap changed", ErrConflict)

// Bootstrap creates the slot table: the owners of all slots come from
// ringcompat.InitialAssignment over nodes with vnodes points per unit of
// weight (0 means ringcompat.DefaultVNodes), so the same nodes give the same
// table anywhere. Nodes not yet registered are registered; registered ones
// must match (zone, weight). An empty nodes list means every registered
// node that is not draining or down. New nodes get indexes in id order. It
// returns the table read right after; ErrAlreadyBootstrapped when a table
// exists.
//
// At a replication policy with rf > 1 every slot also gets rf replicas in
// distinct zones from ringcompat.InitialReplicas, its owner the primary and
// every replica in sync; the nodes need zones (ErrNoZone), in at least rf
// zones (ErrRFAboveZones). The sets are written in a transaction of their
// own just before the owners' (both do not fit in one); no reader sees
// them before the owners, since the table does not exist until then.
func (d *Directory) Bootstrap(ctx context.Context, nodes []Node, vnodes int, by string) (*Snapshot, error) {
	return d.BootstrapWith(ctx, nodes, vnodes, nil, by)
}

// BootstrapWith is Bootstrap at policy (nil: the stored one), which it
// stores in the transaction of the replica sets: a bootstrap refused for
// its zones leaves the policy as it was.
func (d *Directory) BootstrapWith(ctx context.Context, nodes []Node, vnodes int, policy *Replication, by string) (*Snapshot, error) {
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
	if policy != nil {
		if err := policy.Validate(); err != nil {
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		if len(nodes) > 0 {
			if err := checkMemberZones(nodes, policy.RF); err != nil {
				return nil, fmt.Errorf("bootstrap: %w", err)
			}
		}
	}
	st, _, err := d.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	if st.bootstrapped() {
		return nil, fmt.Errorf("bootstrap: %w at version %d", ErrAlreadyBootstrapped, st.version)
	}
	// etcd takes at most 128 operations per transaction (its default
	// --max-txn-ops), and the bootstrap txn writes the 64 owner chunks, the
	// version and history. With more new nodes than fit beside them, or
	// replica sets to write first, the nodes are registered first, one
	// change each.
	rf := st.policy.RF
	if policy != nil {
		rf = policy.RF
	}
	if len(nodes) > maxBootstrapNodesInTxn || rf > 1 {
		for _, n := range nodes {
			if _, ok := st.nodes[n.ID]; ok {
				continue
			}
			if _, err := d.RegisterNode(ctx, n); err != nil {
				return nil, fmt.Errorf("bootstrap: register %s: %w", n.ID, err)
			}
		}
	}
	for attempt := 1; ; attempt++ {
		_, err = d.update(ctx, "bootstrap replica sets", updateOpts{}, func(st *state, m *mutation) error {
			return d.placeBootstrapSets(st, m, bootstrapArgs{nodes, vnodes, policy, by})
		})
		if err != nil {
			return nil, err
		}
		_, err = d.update(ctx, "bootstrap", updateOpts{}, func(st *state, m *mutation) error {
			return d.bootstrap(st, m, nodes, vnodes, by)
		})
		if !errors.Is(err, errSetsChanged) || attempt >= d.cfg.UpdateAttempts {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	d.lg.Info("directory bootstrapped", "nodes", len(nodes), "vnodes", vnodes, "rf", rf, "by", by)
	return d.Snapshot(ctx)
}

// bootstrap is the bootstrap's change: nodes registered, owners assigned.
func (d *Directory) bootstrap(st *state, m *mutation, nodes []Node, vnodes int, by string) error {
	if st.bootstrapped() {
		return fmt.Errorf("%w at version %d", ErrAlreadyBootstrapped, st.version)
	}
	members, err := st.bootstrapMembers(nodes)
	if err != nil {
		return err
	}
	now := d.cfg.Now().UTC()
	ring := make([]ringcompat.Node, len(members))
	for i, n := range members {
		ring[i] = ringcompat.Node{ID: n.ID, Weight: n.Weight, Zone: n.Zone}
		if _, ok := st.nodes[n.ID]; ok {
			continue
		}
		if err := st.checkNodeZone(n.ID, n.Zone); err != nil {
			return err
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
	want, err := st.bootstrapSets(members, vnodes)
	if err != nil {
		return err
	}
	for i := range chunks {
		if !sameChunk(st.replicas[i], want[i]) {
			return errSetsChanged
		}
	}
	for s := range st.owners {
		if r := st.replicasOf(s); r != nil && r.isr[0] != st.owners[s] {
			return fmt.Errorf("%w: slot %d: the replica walk's primary is not the initial owner", ErrPrecondition, s)
		}
	}
	for c := range chunks {
		m.chunks[c] = true
	}
	reason := fmt.Sprintf("%d nodes, %d vnodes per weight", len(members), vnodes)
	if st.policy.RF > 1 {
		reason += fmt.Sprintf(", %s", st.policy)
	}
	m.change = Change{Kind: ChangeBootstrap, Reason: reason, By: by}
	return nil
}

// bootstrapMembers resolves a bootstrap's nodes on st: the given ones, or
// every active registered node, sorted by id; registered ones must match.
func (st *state) bootstrapMembers(nodes []Node) ([]Node, error) {
	members := slices.Clone(nodes)
	if len(members) == 0 {
		for _, id := range slices.Sorted(maps.Keys(st.nodes)) {
			if n := st.nodes[id]; n.state() == NodeActive {
				members = append(members, n.node())
			}
		}
		if len(members) == 0 {
			return nil, fmt.Errorf("%w: no nodes given and no active node registered", ErrInvalid)
		}
	}
	slices.SortFunc(members, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
	for _, n := range members {
		old, ok := st.nodes[n.ID]
		if !ok {
			continue
		}
		if old.Zone != n.Zone || old.Weight != n.Weight {
			return nil, fmt.Errorf("%w: node %q is registered with zone %q weight %d, not zone %q weight %d",
				ErrPrecondition, n.ID, old.Zone, old.Weight, n.Zone, n.Weight)
		}
		if old.state() != NodeActive {
			return nil, fmt.Errorf("%w: node %q is %s", ErrPrecondition, n.ID, old.state())
		}
	}
	return members, nil
}

// bootstrapSets returns the stored sets a bootstrap over members needs at
// st's policy: none at rf 1; at rf > 1 the ring's replica walk, every
// replica in sync, at epoch 0 (the bootstrap is the owners' last change).
// Every member must be registered.
func (st *state) bootstrapSets(members []Node, vnodes int) ([chunks]*replicaChunk, error) {
	var out [chunks]*replicaChunk
	rf := st.policy.RF
	if rf <= 1 {
		return out, nil
	}
	if err := checkMemberZones(members, rf); err != nil {
		return out, err
	}
	ring := make([]ringcompat.Node, len(members))
	for i, n := range members {
		ring[i] = ringcompat.Node{ID: n.ID, Weight: n.Weight, Zone: n.Zone}
	}
	sets, err := ringcompat.InitialReplicas(ring, vnodes, rf)
	if err != nil {
		return out, fmt.Errorf("%w: initial replicas: %w", ErrInvalid, err)
	}
	for s, set := range sets {
		r := &replicaRec{isr: make([]uint16, len(set))}
		for i, id := range set {
			n, ok := st.nodes[id]
			if !ok {
				return out, fmt.Errorf("%w: node %q is not registered", ErrNotFound, id)
			}
			r.isr[i] = n.Index
		}
		if out[s/chunkSlots] == nil {
			out[s/chunkSlots] = new(replicaChunk)
		}
		out[s/chunkSlots][s%chunkSlots] = r
	}
	return out, nil
}

// checkMemberZones says whether rf replicas of every slot fit in the
// zones of a bootstrap's nodes.
func checkMemberZones(members []Node, rf int) error {
	if rf <= 1 {
		return nil
	}
	zones := map[string]bool{}
	for _, n := range members {
		if n.Zone == "" {
			return fmt.Errorf("%w: rf %d needs a zone on every node, and %s has none", ErrNoZone, rf, n.ID)
		}
		zones[n.Zone] = true
	}
	if len(zones) < rf {
		return fmt.Errorf("%w: rf %d needs nodes in %d zones, these are in %d", ErrRFAboveZones, rf, rf, len(zones))
	}
	return nil
}

// bootstrapArgs are what a bootstrap was asked for.
type bootstrapArgs struct {
	nodes  []Node
	vnodes int
	policy *Replication // nil: the stored one
	by     string
}

// placeBootstrapSets stores the policy asked for, if any, and writes the
// sets a bootstrap needs (bootstrapSets) in one change of their own,
// clearing any left by an earlier attempt at another policy. Nothing to
// write is a no-op.
func (d *Directory) placeBootstrapSets(st *state, m *mutation, a bootstrapArgs) error {
	if st.bootstrapped() {
		return fmt.Errorf("%w at version %d", ErrAlreadyBootstrapped, st.version)
	}
	old := st.policy
	if a.policy != nil && *a.policy != old {
		if err := st.checkZones(a.policy.RF, false); err != nil {
			return err
		}
		st.policy = *a.policy
		m.policy = true
	}
	var want [chunks]*replicaChunk
	if st.policy.RF > 1 {
		members, err := st.bootstrapMembers(a.nodes)
		if err != nil {
			return err
		}
		if want, err = st.bootstrapSets(members, a.vnodes); err != nil {
			return err
		}
	}
	for i := range chunks {
		if !sameChunk(st.replicas[i], want[i]) {
			st.replicas[i] = want[i]
			m.replicaChunks[i] = true
		}
	}
	switch {
	case len(m.replicaChunks) > 0:
		m.change = Change{Kind: ChangeBootstrapReplicas, Reason: fmt.Sprintf("replica sets at %s, ahead of the owners", st.policy), By: a.by}
	case m.policy:
		m.change = Change{Kind: ChangeReplication, Reason: fmt.Sprintf("%s -> %s: bootstrap", old, st.policy), By: a.by}
	}
	if m.policy && len(m.replicaChunks) > 0 {
		m.change.Reason += fmt.Sprintf(" (policy was %s)", old)
	}
	return nil
}
