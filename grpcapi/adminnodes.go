package grpcapi

// The Admin API's node calls: registration and leases, drain, removal, weight, address.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/directory"
)

// RegisterNode implements slotdv1.AdminServer. A node registering again
// keeps its weight (SetWeight changes it) and its state, and gets its
// address and zone updated.
func (s *AdminServer) RegisterNode(ctx context.Context, req *slotdv1.RegisterNodeRequest) (*slotdv1.RegisterNodeResponse, error) {
	pn := req.GetNode()
	if pn.GetId() == "" || pn.GetAddress() == "" {
		return nil, invalid("register node: id and address are required")
	}
	if err := auth.CheckNode(ctx, pn.GetId()); err != nil {
		return nil, toStatus(fmt.Errorf("register node %s: %w", pn.GetId(), err))
	}
	n := directory.Node{ID: pn.GetId(), Addr: pn.GetAddress(), Zone: pn.GetZone(), Weight: int(pn.GetWeight())}
	if n.Weight == 0 {
		n.Weight = 1
	}
	if old, _, err := s.node(ctx, n.ID); err == nil {
		n.Weight = int(old.GetWeight())
		if n.Zone == "" {
			n.Zone = old.GetZone()
		}
	} else if !errors.Is(err, directory.ErrNotFound) {
		return nil, toStatus(err)
	}
	// Who registered: the store's own identity, or the admin's.
	rctx, _ := s.audited(ctx, directory.AuditNode, "", "", n.ID, "node "+n.ID)
	got, err := s.dir.RegisterNode(rctx, n)
	if err != nil {
		return nil, zoneHint(err, "start the store with its zone (slotkv: --zone ZONE)")
	}
	// Registration grants a new lease (keeping the run of heartbeats the
	// hold-down counts); heartbeats renew it by its id.
	lease, err := s.dir.GrantLease(ctx, n.ID, directory.Registrant{Incarnation: req.GetIncarnation(), Attempt: req.GetAttempt()})
	if err != nil {
		return nil, toStatus(err)
	}
	s.leases.renewed(n.ID, lease, time.Now())
	node, v, err := s.node(ctx, n.ID)
	if err != nil {
		return nil, toStatus(err)
	}
	s.lg.Info("node registered", "node", n.ID, "addr", n.Addr, "state", node.GetState().String(), "lease", fmt.Sprintf("%x", int64(lease.ID)))
	return &slotdv1.RegisterNodeResponse{
		Node: node, Version: v,
		Session:           fmt.Sprintf("%s@%d", got.ID, got.Registered.UnixNano()),
		HeartbeatInterval: durationpb.New((lease.TTL - lease.Margin) / 3),
		Ttl:               durationpb.New(lease.TTL),
		LeaseId:           int64(lease.ID),
		LeaseMargin:       durationpb.New(lease.Margin),
	}, nil
}

// Heartbeat implements slotdv1.AdminServer: it renews the node's lease.
// NOT_FOUND when the node is not registered (removed, declared failed) or
// the lease is not its current one (it ran out, or a registration replaced
// it): nothing is renewed, and the store must register again.
// PERMISSION_DENIED for a caller renewing another node's lease.
func (s *AdminServer) Heartbeat(ctx context.Context, req *slotdv1.HeartbeatRequest) (*slotdv1.HeartbeatResponse, error) {
	if err := s.renewLease(ctx, req.GetNodeId(), req.GetLeaseId()); err != nil {
		return nil, err
	}
	if req.OrphanBytes != nil {
		if err := s.dir.SetOrphanBytes(ctx, req.GetNodeId(), req.GetOrphanBytes()); err != nil {
			return nil, toStatus(err)
		}
	}
	// The answer comes from the hub's map: no second etcd read per beat.
	if m := s.hub.Current(); m != nil {
		if n, ok := m.Node(req.GetNodeId()); ok {
			return &slotdv1.HeartbeatResponse{State: n.State, Version: m.Version()}, nil
		}
	}
	node, v, err := s.node(ctx, req.GetNodeId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.HeartbeatResponse{State: node.GetState(), Version: v}, nil
}

// DrainNode implements slotdv1.AdminServer.
func (s *AdminServer) DrainNode(ctx context.Context, req *slotdv1.DrainNodeRequest) (*slotdv1.DrainNodeResponse, error) {
	n, v, err := s.changeNode(ctx, req.GetNodeId(), req.GetOperator(), "drain", s.dir.Drain)
	if err != nil {
		return nil, err
	}
	return &slotdv1.DrainNodeResponse{Node: n, Version: v}, nil
}

// UndrainNode implements slotdv1.AdminServer.
func (s *AdminServer) UndrainNode(ctx context.Context, req *slotdv1.UndrainNodeRequest) (*slotdv1.UndrainNodeResponse, error) {
	n, v, err := s.changeNode(ctx, req.GetNodeId(), req.GetOperator(), "undrain", s.dir.Undrain)
	if err != nil {
		return nil, err
	}
	return &slotdv1.UndrainNodeResponse{Node: n, Version: v}, nil
}

// changeNode applies a directory node change (Drain, Undrain) on behalf of
// operator and returns the node as it is after, at the directory version.
func (s *AdminServer) changeNode(ctx context.Context, id, operator, verb string, change func(ctx context.Context, id, reason, by string) (uint64, error)) (*slotdv1.Node, uint64, error) {
	ctx, op := s.audited(ctx, directory.AuditNode, "", "", id, operator)
	reason := reasonOf(ctx)
	if reason == "" {
		reason = verb + " requested by " + op
	}
	if _, err := change(ctx, id, reason, op); err != nil {
		return nil, 0, toStatus(err)
	}
	n, v, err := s.node(ctx, id)
	if err != nil {
		return nil, 0, toStatus(err)
	}
	return n, v, nil
}

// RemoveNode implements slotdv1.AdminServer.
func (s *AdminServer) RemoveNode(ctx context.Context, req *slotdv1.RemoveNodeRequest) (*slotdv1.RemoveNodeResponse, error) {
	ctx, op := s.audited(ctx, directory.AuditNode, "", "", req.GetNodeId(), req.GetOperator())
	reason := reasonOf(ctx)
	if reason == "" {
		reason = "removed by " + op
	}
	v, err := s.dir.RemoveNode(ctx, req.GetNodeId(), reason, op)
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.RemoveNodeResponse{Version: v}, nil
}

// SetWeight implements slotdv1.AdminServer.
func (s *AdminServer) SetWeight(ctx context.Context, req *slotdv1.SetWeightRequest) (*slotdv1.SetWeightResponse, error) {
	ctx, op := s.audited(ctx, directory.AuditNode, "", "", req.GetNodeId(), req.GetOperator())
	if _, err := s.dir.SetWeight(ctx, req.GetNodeId(), int(req.GetWeight()), op); err != nil {
		return nil, toStatus(err)
	}
	n, v, err := s.node(ctx, req.GetNodeId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.SetWeightResponse{Node: n, Version: v}, nil
}

// UpdateAddr implements slotdv1.AdminServer.
func (s *AdminServer) UpdateAddr(ctx context.Context, req *slotdv1.UpdateAddrRequest) (*slotdv1.UpdateAddrResponse, error) {
	ctx, op := s.audited(ctx, directory.AuditNode, "", "", req.GetNodeId(), req.GetOperator())
	if _, err := s.dir.UpdateAddr(ctx, req.GetNodeId(), req.GetAddress(), op); err != nil {
		return nil, toStatus(err)
	}
	n, v, err := s.node(ctx, req.GetNodeId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.UpdateAddrResponse{Node: n, Version: v}, nil
}
