package grpcapi

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/slots"
)

// RecoveryServer serves slotdv1.Recovery: the fresh map stores confirm
// clean-ups against, declaring a node failed, and directory backups.
type RecoveryServer struct {
	slotdv1.UnimplementedRecoveryServer
	cfg Config
	dir *directory.Directory
	lg  *slog.Logger
	// lastBytes is the node's last load report's bytes (load.Aggregator),
	// for the estimate of what declaring it failed loses.
	lastBytes func(id string) (uint64, time.Time, bool)
}

var _ slotdv1.RecoveryServer = (*RecoveryServer)(nil)

// operator names the caller in history, as AdminServer.operator does.
func (s *RecoveryServer) operator(ctx context.Context, claimed string) string {
	if s.cfg.Authenticated {
		return auth.Operator(ctx)
	}
	if claimed == "" {
		return "anonymous"
	}
	return claimed
}

// FreshMap implements slotdv1.RecoveryServer: the map read from etcd in
// one linearizable read, never the hub's copy, which may lag.
func (s *RecoveryServer) FreshMap(ctx context.Context, _ *slotdv1.FreshMapRequest) (*slotdv1.FreshMapResponse, error) {
	m, err := readMap(ctx, s.dir, s.cfg.Hub.ClusterID())
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.FreshMapResponse{Map: m.Proto()}, nil
}

// FailNode implements slotdv1.RecoveryServer. It previews (dry_run, or
// without accept_data_loss) or applies: the node must be down for at least
// the hold-down and hold no live lease; its slots go to the planner's drain
// targets among the active nodes, empty, in one version (see
// directory.FailNode).
func (s *RecoveryServer) FailNode(ctx context.Context, req *slotdv1.FailNodeRequest) (*slotdv1.FailNodeResponse, error) {
	id := req.GetNodeId()
	snap, err := s.dir.Snapshot(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	n, ok := snap.Node(id)
	if !ok {
		return nil, toStatus(fmt.Errorf("fail node: %w: node %q is not registered", directory.ErrNotFound, id))
	}
	if !n.Down {
		return nil, toStatus(fmt.Errorf("fail node: %w: node %q is %s, not down; only a node that stopped heartbeating can be declared failed", directory.ErrPrecondition, id, n.State))
	}
	live, err := s.dir.Liveness(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if l := live[id]; !l.LastHeartbeat.IsZero() {
		return nil, toStatus(fmt.Errorf("fail node: %w: node %q is heartbeating again (last %s): it is coming back, not lost; let the hold-down pass and drain it instead",
			directory.ErrPrecondition, id, l.LastHeartbeat.Format(time.RFC3339)))
	}
	owners, err := failTargets(snap, id)
	if err != nil {
		return nil, toStatus(fmt.Errorf("fail node: %w", err))
	}
	resp := &slotdv1.FailNodeResponse{Version: snap.Version}
	if s.lastBytes != nil {
		if b, _, ok := s.lastBytes(id); ok {
			resp.EstimatedBytesLost, resp.BytesKnown = int64(b), true
		}
	}
	set := snap.SlotsOf(id)
	resp.Slots, resp.SlotCount = set.String(), uint32(set.Count())
	counts := map[string]uint32{}
	for _, to := range owners {
		counts[to]++
	}
	for _, to := range slices.Sorted(maps.Keys(counts)) {
		resp.NewOwners = append(resp.NewOwners, &slotdv1.NewOwner{NodeId: to, Slots: counts[to]})
	}
	for _, mv := range snap.Moves {
		if mv.From == id || mv.To == id {
			resp.MovesEnded++
		}
	}
	if req.GetDryRun() || !req.GetAcceptDataLoss() {
		if !req.GetDryRun() {
			return resp, toStatus(fmt.Errorf("fail node: %w: declaring %s failed loses its data (%d slots); say so with accept_data_loss", directory.ErrPrecondition, id, set.Count()))
		}
		return resp, nil
	}
	expect := req.GetExpectVersion()
	if expect == 0 {
		expect = snap.Version // the table the targets were computed on
	}
	res, err := s.dir.FailNode(ctx, directory.FailSpec{
		Node: id, Owners: owners, ExpectVersion: expect, Reason: req.GetReason(), By: s.operator(ctx, req.GetOperator()),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	resp.Version, resp.Applied, resp.MovesEnded = res.Version, true, uint32(res.MovesEnded)
	s.lg.Warn("node declared failed", "node", id, "slots", set.Count(), "by", s.operator(ctx, req.GetOperator()), "version", res.Version)
	return resp, nil
}

// failTargets gives each slot of the failed node a new owner: the planner's
// drain targets (weights, zones, minimum moves) among the active nodes, and
// any slot the plan leaves (it moves only what it must) to the active node
// with the fewest slots.
func failTargets(snap *directory.Snapshot, id string) (map[slots.Slot]string, error) {
	var nodes []planner.Node
	counts := map[string]int{}
	for _, n := range snap.Nodes {
		st := string(n.State)
		if n.ID == id {
			st = planner.StateDraining
		}
		nodes = append(nodes, planner.Node{ID: n.ID, Weight: n.Weight, Zone: n.Zone, State: st})
		if n.State == directory.NodeActive && n.ID != id {
			counts[n.ID] = 0
		}
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("%w: no active node can take the slots of %s", directory.ErrPrecondition, id)
	}
	owners := snap.Owners()
	for _, o := range owners {
		if _, ok := counts[o]; ok {
			counts[o]++
		}
	}
	in := planner.Input{Version: snap.Version, Owners: owners, Nodes: nodes}
	busy := &slots.Set{}
	for _, mv := range snap.Moves {
		if mv.From != id && mv.To != id {
			busy.Add(mv.Slot)
		}
	}
	in.Busy = busy
	out := map[slots.Slot]string{}
	if p, err := planner.Compute(in); err == nil {
		for _, mv := range p.Moves {
			if mv.From == id {
				if _, ok := counts[mv.To]; ok {
					out[slots.MustNew(mv.Slot)] = mv.To
					counts[mv.To]++
				}
			}
		}
	}
	set := snap.SlotsOf(id)
	for sl := range set.All() {
		if _, ok := out[sl]; ok {
			continue
		}
		best := ""
		for _, c := range slices.Sorted(maps.Keys(counts)) {
			if best == "" || counts[c] < counts[best] {
				best = c
			}
		}
		out[sl] = best
		counts[best]++
	}
	return out, nil
}

// Backup implements slotdv1.RecoveryServer: the directory at one etcd
// revision, as the document slotd restore reads.
func (s *RecoveryServer) Backup(ctx context.Context, req *slotdv1.BackupRequest) (*slotdv1.BackupResponse, error) {
	b, err := s.dir.Backup(ctx, int(req.GetHistory()))
	if err != nil {
		return nil, toStatus(err)
	}
	doc, err := b.Marshal()
	if err != nil {
		return nil, toStatus(fmt.Errorf("backup: %w", err))
	}
	return &slotdv1.BackupResponse{Document: doc, Version: b.Version, EtcdRevision: b.EtcdRevision}, nil
}
