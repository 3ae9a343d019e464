package directory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The replication policy (docs/replication.md, "Model" and "Zones"): how
// many replicas each slot should have (rf) and how few in-sync ones it may
// go down to (min_isr). It is part of the versioned table: a change bumps
// the version and is recorded in history, so that every reader sees the
// policy and the sets it governs at one version, and every writer's
// transaction (which compares the version) checks against the policy in
// force.

// MaxRF is the largest replication factor.
const MaxRF = 5

// ChangeReplication records a change of the replication policy.
const ChangeReplication = "replication"

// Replication is the cluster's replication policy.
type Replication struct {
	// RF is the number of replicas each slot should have, 1-MaxRF, each in
	// its own zone.
	RF int `json:"rf"`
	// MinISR is the fewest in-sync replicas a slot may have: no writer
	// takes an ISR below it. 1 <= MinISR <= RF.
	MinISR int `json:"min_isr"`
}

// DefaultReplication is the policy while none is stored: rf 1, a slot's
// owner is its only replica.
func DefaultReplication() Replication { return Replication{RF: 1, MinISR: 1} }

// Validate reports a policy out of range, as ErrInvalid.
func (p Replication) Validate() error {
	switch {
	case p.RF < 1 || p.RF > MaxRF:
		return fmt.Errorf("%w: rf %d is not in 1-%d", ErrInvalid, p.RF, MaxRF)
	case p.MinISR < 1 || p.MinISR > p.RF:
		return fmt.Errorf("%w: min_isr %d is not in 1-%d (at least 1, at most rf)", ErrInvalid, p.MinISR, p.RF)
	}
	return nil
}

func (p Replication) String() string { return fmt.Sprintf("rf %d min_isr %d", p.RF, p.MinISR) }

// ReplicationSpec asks for a policy change.
type ReplicationSpec struct {
	// RF and MinISR are the new values; nil keeps the current one.
	RF, MinISR *int
	// ExpectVersion, when non-zero, applies the change only at this
	// version; ErrConflict otherwise.
	ExpectVersion uint64
	Reason        string
	By            string
}

// SetReplication changes the replication policy in one versioned change
// and returns the policy and the version after it (the current ones when
// nothing changed). It refuses, changing nothing:
//   - a policy out of range (ErrInvalid);
//   - rf > 1 while an active node has no zone (ErrNoZone), or, once
//     bootstrapped, with fewer zones holding active nodes than rf
//     (ErrRFAboveZones; before, Bootstrap counts its nodes' zones);
//   - min_isr above the ISR of some slot (ErrBelowMinISR);
//   - a new rf on a bootstrapped table whose sets do not all have that
//     many replicas already (ErrRFNeedsMoves): adding or removing replicas
//     is the mover's work, as a plan.
func (d *Directory) SetReplication(ctx context.Context, spec ReplicationSpec) (Replication, uint64, error) {
	if spec.RF == nil && spec.MinISR == nil {
		return Replication{}, 0, fmt.Errorf("set replication: %w: give rf, min_isr or both", ErrInvalid)
	}
	if err := checkText(spec.Reason, spec.By); err != nil {
		return Replication{}, 0, fmt.Errorf("set replication: %w", err)
	}
	var out Replication
	v, err := d.update(ctx, "set replication", updateOpts{expect: spec.ExpectVersion}, func(st *state, m *mutation) error {
		old, p := st.policy, st.policy
		if spec.RF != nil {
			p.RF = *spec.RF
		}
		if spec.MinISR != nil {
			p.MinISR = *spec.MinISR
		}
		out = old
		if err := p.Validate(); err != nil {
			return err
		}
		if old == p {
			return nil
		}
		if err := st.checkZones(p.RF, st.bootstrapped()); err != nil {
			return err
		}
		if st.bootstrapped() {
			if err := st.checkSetsFit(p, old.RF); err != nil {
				return err
			}
		}
		st.policy = p
		m.policy = true
		reason := fmt.Sprintf("%s -> %s", old, p)
		if spec.Reason != "" {
			reason += ": " + spec.Reason
		}
		m.change = Change{Kind: ChangeReplication, Reason: reason, By: spec.By}
		out = p
		return nil
	})
	if err != nil {
		return Replication{}, 0, err
	}
	return out, v, nil
}

// checkSetsFit says whether every slot's set fits policy p without a
// replica added or removed: a new rf (from old) needs every set to have rf
// members already, and every ISR must hold min_isr.
func (st *state) checkSetsFit(p Replication, old int) error {
	for s := range st.owners {
		r := st.setOf(s)
		if p.RF != old && len(r.members()) != p.RF {
			return fmt.Errorf("%w: slot %d has %d replicas: changing rf from %d to %d adds or removes replicas, a planned operation the mover does not run yet; rf changes only on a cluster not bootstrapped yet, or whose slots all have %d replicas",
				ErrRFNeedsMoves, s, len(r.members()), old, p.RF, p.RF)
		}
		if len(r.isr) < p.MinISR {
			return fmt.Errorf("%w: slot %d has %d in-sync replicas, fewer than min_isr %d", ErrBelowMinISR, s, len(r.isr), p.MinISR)
		}
	}
	return nil
}

// checkZones says whether rf replicas fit the active nodes' zones: with
// rf > 1 every active node needs a zone and, when count is set, at least
// rf zones must hold active nodes (before the bootstrap, the bootstrap
// counts the zones of its nodes).
func (st *state) checkZones(rf int, count bool) error {
	if rf <= 1 {
		return nil
	}
	nodes := make([]Node, 0, len(st.nodes))
	for _, n := range st.nodes {
		nodes = append(nodes, n.node())
	}
	zones, bare := ActiveZones(nodes)
	if len(bare) > 0 {
		return fmt.Errorf("%w: rf %d needs a zone on every active node, and %s has none; give each node a zone first",
			ErrNoZone, rf, strings.Join(bare, ", "))
	}
	if count && len(zones) < rf {
		return fmt.Errorf("%w: rf %d needs %d zones with active nodes, there are %d (%s)",
			ErrRFAboveZones, rf, rf, len(zones), strings.Join(zones, ", "))
	}
	return nil
}

// ActiveZones returns the zones that hold active nodes and the active
// nodes without a zone, each sorted.
func ActiveZones(nodes []Node) (zones, bare []string) {
	seen := map[string]bool{}
	for _, n := range nodes {
		switch {
		case n.State != NodeActive:
		case n.Zone == "":
			bare = append(bare, n.ID)
		case !seen[n.Zone]:
			seen[n.Zone] = true
			zones = append(zones, n.Zone)
		}
	}
	slices.Sort(zones)
	slices.Sort(bare)
	return zones, bare
}

// checkNodeZone refuses a node without a zone about to be active under a
// policy with rf > 1.
func (st *state) checkNodeZone(id, zone string) error {
	if st.policy.RF > 1 && zone == "" {
		return fmt.Errorf("%w: node %q has no zone, and the cluster keeps %d replicas of each slot in distinct zones; give the node a zone",
			ErrNoZone, id, st.policy.RF)
	}
	return nil
}

// Replication returns the replication policy and the version it was read
// at.
func (d *Directory) Replication(ctx context.Context) (Replication, uint64, error) {
	st, _, err := d.read(ctx)
	if err != nil {
		return Replication{}, 0, err
	}
	if err := d.checkSchema(st); err != nil {
		return Replication{}, 0, fmt.Errorf("read replication: %w", err)
	}
	return st.policy, st.version, nil
}

// InitReplication stores the default policy (rf 1, min_isr 1) when none is
// stored, without a version bump: it changes nothing a reader sees (an
// absent policy reads as the default). It is schema 3's migration step,
// and idempotent.
func (d *Directory) InitReplication(ctx context.Context) error {
	b, err := json.Marshal(DefaultReplication())
	if err != nil {
		return fmt.Errorf("directory: init replication: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	_, err = d.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(d.k.replication()), "=", 0)).
		Then(clientv3.OpPut(d.k.replication(), string(b))).
		Commit()
	return fromEtcd(ctx, "init replication", err)
}
