package grpcapi

// The Admin API's views of replica sets: the summary Status carries and
// ListReplicaSets' ranges.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
)

// replicaStatus is Status's replicas: from snap when the directory is
// bootstrapped, else the policy and the zones of nodes alone.
func (s *AdminServer) replicaStatus(ctx context.Context, snap *directory.Snapshot, nodes []directory.Node) (*slotdv1.ReplicaStatus, error) {
	out := &slotdv1.ReplicaStatus{}
	out.Zones, _ = directory.ActiveZones(nodes)
	if snap == nil {
		p, _, err := s.dir.Replication(ctx)
		if err != nil {
			return nil, err
		}
		out.Policy = policyProto(p)
		return out, nil
	}
	sum := snap.ReplicaSummary()
	out.Policy = policyProto(snap.Replication)
	out.UnderReplicated, out.BelowMinIsr = uint32(sum.UnderReplicated), uint32(sum.BelowMinISR)
	out.WithLearners, out.ZoneViolations = uint32(sum.WithLearners), uint32(sum.ZoneViolations)
	for zones, n := range sum.ZoneSpread {
		if n > 0 {
			out.ZoneSpread = append(out.ZoneSpread, &slotdv1.ZoneSpread{Zones: uint32(zones), Slots: uint32(n)})
		}
	}
	for _, n := range snap.Nodes {
		h := sum.Nodes[n.ID]
		out.Nodes = append(out.Nodes, &slotdv1.NodeReplicas{NodeId: n.ID,
			Primaries: uint32(h.Primaries), Followers: uint32(h.Followers), Learners: uint32(h.Learners)})
	}
	return out, nil
}

// ListReplicaSets implements slotdv1.AdminServer.
func (s *AdminServer) ListReplicaSets(ctx context.Context, req *slotdv1.ListReplicaSetsRequest) (*slotdv1.ListReplicaSetsResponse, error) {
	snap, err := s.dir.Snapshot(ctx)
	if errors.Is(err, directory.ErrNotBootstrapped) {
		return nil, status.Error(codes.FailedPrecondition, "list replica sets: the directory is not bootstrapped, so no slot has replicas yet; bootstrap it with slotctl init")
	}
	if err != nil {
		return nil, toStatus(err)
	}
	only := req.GetNodeId()
	if _, ok := snap.Node(only); only != "" && !ok {
		return nil, status.Error(codes.NotFound, fmt.Sprintf("list replica sets: node %q is not registered; list nodes with slotctl nodes list", only))
	}
	resp := &slotdv1.ListReplicaSetsResponse{Version: snap.Version, Policy: policyProto(snap.Replication)}
	for _, r := range snap.ReplicaRanges() {
		if only != "" && !slices.Contains(r.ISR, only) && !slices.Contains(r.Learners, only) {
			continue
		}
		if req.GetUnderReplicatedOnly() && !r.UnderReplicated {
			continue
		}
		resp.Ranges = append(resp.Ranges, &slotdv1.ReplicaRange{
			From: uint32(r.From.Int()), To: uint32(r.To.Int()), Isr: r.ISR, Learners: r.Learners, Zones: r.Zones,
			UnderReplicated: r.UnderReplicated, BelowMinIsr: r.BelowMinISR, ZoneViolation: r.ZoneViolation,
		})
	}
	return resp, nil
}
