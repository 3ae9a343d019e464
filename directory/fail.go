package directory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/slots"
)

// ChangeNodeFail records that a node was declared lost for good: its slots
// got new owners, empty, and its record was removed.
const ChangeNodeFail = "node-fail"

// FailSpec declares a node failed.
type FailSpec struct {
	// Node is the failed node: it must be down, have been down for at
	// least the hold-down, and hold no live lease (checked in the change's
	// own transaction: the store has stopped serving, see lease.go).
	Node string
	// Owners gives every slot the node owns a new owner: active nodes
	// other than Node. Exactly the node's slots, no other.
	Owners map[slots.Slot]string
	// ExpectVersion, when non-zero, applies the change only at this
	// version (the one the caller previewed); ErrConflict otherwise.
	ExpectVersion uint64
	Reason        string
	By            string
}

// FailResult is what FailNode changed.
type FailResult struct {
	Version uint64
	// MovesEnded counts the moves in flight from or to the node that the
	// change ended.
	MovesEnded int
}

// FailNode declares a node lost for good, in one version: every slot it
// owns gets the owner FailSpec.Owners names (empty: the data is lost), its
// moves in flight end (a move to it leaves the slot with its owner), and
// its record is removed, so that it can only come back as a new node that
// owns nothing. History records "data lost: <node> declared failed by
// <by>". ErrNotFound for an unknown node; ErrPrecondition when it is not
// down past the hold-down or the owners do not cover exactly its slots with
// active nodes; ErrConflict when the version is not ExpectVersion.
func (d *Directory) FailNode(ctx context.Context, spec FailSpec) (FailResult, error) {
	var res FailResult
	op := "fail node " + spec.Node
	if err := checkID("node id", spec.Node); err != nil {
		return res, fmt.Errorf("%s: %w", op, err)
	}
	if err := checkText(spec.Reason, spec.By); err != nil {
		return res, fmt.Errorf("%s: %w", op, err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	_, alive, err := d.aliveOf(rctx, spec.Node)
	cancel()
	if err != nil {
		return res, fromEtcd(ctx, op, err)
	}
	if alive.rev != 0 {
		return res, fmt.Errorf("%s: %w: node %q holds a live lease (granted %s): it may still be serving writes; stop it or cut it off, and retry once its lease has run out (%v after its last heartbeat)",
			op, ErrPrecondition, spec.Node, alive.rec.Granted.Format(time.RFC3339), d.cfg.DownAfter+d.cfg.LeaseMargin)
	}
	v, err := d.update(ctx, op, updateOpts{expect: spec.ExpectVersion, needBootstrap: true, alone: true}, func(st *state, m *mutation) error {
		n, ok := st.nodes[spec.Node]
		if !ok {
			return fmt.Errorf("%w: node %q is not registered", ErrNotFound, spec.Node)
		}
		// The store stopped serving only if no lease of it came back
		// meanwhile (so no write it acknowledges comes after this change).
		m.cmps = append(m.cmps, clientv3.Compare(clientv3.CreateRevision(d.k.alive(spec.Node)), "=", 0))
		now := d.cfg.Now()
		if !n.Down || now.Sub(n.StateSince) < d.cfg.HoldDown {
			return fmt.Errorf("%w: node %q is %s since %s; only a node down for at least the hold-down (%v) can be declared failed",
				ErrPrecondition, spec.Node, n.state(), n.StateSince.Format("15:04:05"), d.cfg.HoldDown)
		}
		if held, _ := st.replicaSlots(n.Index); held > 0 {
			return fmt.Errorf("%w: node %q holds replicas of %d slots with replica sets; declaring such a node failed is a failover of its primaries, which is not built yet",
				ErrPrecondition, spec.Node, held)
		}
		owned := 0
		for s, o := range st.owners {
			if o != n.Index {
				continue
			}
			owned++
			to, ok := spec.Owners[slotOf(uint16(s))]
			if !ok {
				return fmt.Errorf("%w: no new owner for slot %d of %s", ErrPrecondition, s, spec.Node)
			}
			rec, ok := st.nodes[to]
			if !ok || to == spec.Node || rec.state() != NodeActive {
				return fmt.Errorf("%w: slot %d cannot go to %q: not an active node", ErrPrecondition, s, to)
			}
			st.owners[s] = rec.Index
			m.chunk(s)
		}
		if owned != len(spec.Owners) {
			return fmt.Errorf("%w: %d new owners given for the %d slots of %s", ErrPrecondition, len(spec.Owners), owned, spec.Node)
		}
		res.MovesEnded = 0
		for _, s := range slices.Sorted(maps.Keys(st.moves)) {
			if mv := st.moves[s]; mv.From == spec.Node || mv.To == spec.Node {
				delete(st.moves, s)
				m.move(s)
				res.MovesEnded++
			}
		}
		delete(st.nodes, spec.Node)
		m.node(spec.Node)
		reason := fmt.Sprintf("data lost: %s declared failed by %s; %d slots to new owners, empty", spec.Node, orUnknown(spec.By), owned)
		if spec.Reason != "" {
			reason += " (" + spec.Reason + ")"
		}
		m.change = Change{Kind: ChangeNodeFail, Node: spec.Node, Reason: reason, By: spec.By}
		return nil
	})
	res.Version = v
	if err != nil {
		return res, err
	}
	d.lg.Warn("node declared failed; its data is lost", "node", spec.Node, "by", spec.By, "version", v, "moves_ended", res.MovesEnded)
	return res, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "an unnamed operator"
	}
	return s
}
