package grpcapi

// The Admin API's replication calls: the policy (rf, min_isr) and how the
// slots' replica sets stand against it.

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
)

// GetReplication implements slotdv1.AdminServer.
func (s *AdminServer) GetReplication(ctx context.Context, _ *slotdv1.GetReplicationRequest) (*slotdv1.GetReplicationResponse, error) {
	snap, err := s.dir.Snapshot(ctx)
	if errors.Is(err, directory.ErrNotBootstrapped) {
		p, v, err := s.dir.Replication(ctx)
		if err != nil {
			return nil, toStatus(err)
		}
		nodes, _, err := s.dir.Nodes(ctx)
		if err != nil {
			return nil, toStatus(err)
		}
		resp := &slotdv1.GetReplicationResponse{Policy: policyProto(p), Version: v}
		resp.Zones, resp.NodesWithoutZone = directory.ActiveZones(nodes)
		return resp, nil
	}
	if err != nil {
		return nil, toStatus(err)
	}
	h := snap.ReplicaHealth()
	resp := &slotdv1.GetReplicationResponse{
		Policy: policyProto(snap.Replication), Version: snap.Version, Bootstrapped: true,
		UnderReplicated: uint32(h.UnderReplicated), BelowMinIsr: uint32(h.BelowMinISR), WithLearners: uint32(h.WithLearners),
	}
	resp.Zones, resp.NodesWithoutZone = directory.ActiveZones(snap.Nodes)
	return resp, nil
}

// SetReplication implements slotdv1.AdminServer.
func (s *AdminServer) SetReplication(ctx context.Context, req *slotdv1.SetReplicationRequest) (*slotdv1.SetReplicationResponse, error) {
	ctx, op := s.audited(ctx, directory.AuditCluster, "", "", "", req.GetOperator())
	p, v, changed, err := s.setReplication(ctx, req.Rf, req.MinIsr, req.GetReason(), op)
	if err != nil {
		return nil, err
	}
	return &slotdv1.SetReplicationResponse{Policy: policyProto(p), Version: v, Changed: changed}, nil
}

// setReplication changes the policy fields given (nil: kept) and says
// whether anything changed; errors are gRPC statuses.
func (s *AdminServer) setReplication(ctx context.Context, rf, minISR *uint32, reason, op string) (directory.Replication, uint64, bool, error) {
	before, _, err := s.dir.Replication(ctx)
	if err != nil {
		return directory.Replication{}, 0, false, toStatus(err)
	}
	spec := directory.ReplicationSpec{RF: intOf(rf), MinISR: intOf(minISR), Reason: reason, By: op}
	p, v, err := s.dir.SetReplication(ctx, spec)
	if err != nil {
		return directory.Replication{}, 0, false, toStatus(err)
	}
	if p != before {
		s.lg.Info("replication policy changed", "from", before.String(), "to", p.String(), "by", op, "reason", reason)
	}
	return p, v, p != before, nil
}

// intOf widens an optional proto field (nil stays nil; values above an int
// stay above every bound the directory checks).
func intOf(v *uint32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}

func policyProto(p directory.Replication) *slotdv1.ReplicationPolicy {
	return &slotdv1.ReplicationPolicy{Rf: uint32(p.RF), MinIsr: uint32(p.MinISR)}
}

// zoneHint adds to a refusal for want of a zone what the operator sets:
// how tells the way the node came (a store's flag, a node spec).
func zoneHint(err error, how string) error {
	if !errors.Is(err, directory.ErrNoZone) {
		return toStatus(err)
	}
	return status.Error(codes.FailedPrecondition, fmt.Sprintf("%v; %s", err, how))
}
