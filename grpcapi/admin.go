package grpcapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/clusterstatus"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/mover/planner"
)

// DefaultHistoryLimit is History's page size when the request gives none.
const DefaultHistoryLimit = 100

// maxHistoryLimit bounds one History page.
const maxHistoryLimit = 10000

// AdminServer serves slotdv1.Admin over the directory and the mover's
// control API. Every change goes to etcd; nothing is cached here.
type AdminServer struct {
	slotdv1.UnimplementedAdminServer
	cfg Config
	dir *directory.Directory
	ctl *mover.Control
	hub *Hub
	lg  *slog.Logger
	// leases counts grants and refusals and knows when each store stops
	// serving (leases.go).
	leases *leases
}

var _ slotdv1.AdminServer = (*AdminServer)(nil)

// operator names the caller in history: its authenticated identity when
// authorization runs (a caller cannot claim to be someone else), else the
// request's operator field.
func (s *AdminServer) operator(ctx context.Context, claimed string) string {
	if s.cfg.Authenticated {
		return auth.Operator(ctx)
	}
	if claimed == "" {
		return "anonymous"
	}
	return claimed
}

// node returns the node id as the directory has it now, and the version.
func (s *AdminServer) node(ctx context.Context, id string) (*slotdv1.Node, uint64, error) {
	nodes, v, err := s.dir.Nodes(ctx)
	if err != nil {
		return nil, 0, err
	}
	i := slices.IndexFunc(nodes, func(n directory.Node) bool { return n.ID == id })
	if i < 0 {
		return nil, v, fmt.Errorf("%w: node %q is not registered", directory.ErrNotFound, id)
	}
	return nodeProto(nodes[i]), v, nil
}

// Bootstrap implements slotdv1.AdminServer.
func (s *AdminServer) Bootstrap(ctx context.Context, req *slotdv1.BootstrapRequest) (*slotdv1.BootstrapResponse, error) {
	nodes := make([]directory.Node, 0, len(req.GetNodes()))
	for _, n := range req.GetNodes() {
		w := int(n.GetWeight())
		if w == 0 {
			w = 1
		}
		nodes = append(nodes, directory.Node{ID: n.GetId(), Addr: n.GetAddress(), Zone: n.GetZone(), Weight: w})
	}
	ctx, op := s.audited(ctx, directory.AuditCluster, "", "", "", req.GetOperator())
	var policy *directory.Replication
	if r := req.GetReplication(); r != nil {
		policy = &directory.Replication{RF: int(r.GetRf()), MinISR: int(r.GetMinIsr())}
	}
	snap, err := s.dir.BootstrapWith(ctx, nodes, int(req.GetVnodes()), policy, op)
	if err != nil {
		return nil, toStatus(err)
	}
	m, err := mapOf(snap, s.cfg.Hub.ClusterID())
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.BootstrapResponse{Map: m.Proto()}, nil
}

// inFlight returns the directory's moves in flight by slot (nil when the
// table cannot be read: plans are then shown without live phases).
func (s *AdminServer) inFlight(ctx context.Context) map[int]directory.Move {
	snap, err := s.dir.Snapshot(ctx)
	if err != nil {
		return nil
	}
	out := make(map[int]directory.Move, len(snap.Moves))
	for _, m := range snap.Moves {
		out[m.Slot.Int()] = m
	}
	return out
}

// Plan implements slotdv1.AdminServer.
func (s *AdminServer) Plan(ctx context.Context, req *slotdv1.PlanRequest) (*slotdv1.PlanResponse, error) {
	by, err := planner.ParseBalanceBy(req.GetBalanceBy())
	if err != nil {
		return nil, invalid("plan: " + err.Error())
	}
	if req.GetBalanceBy() == "" {
		by = "" // slotd's --balance-by
	}
	p, err := s.ctl.Propose(ctx, mover.PlanRequest{
		Edits:     editsFrom(req.GetAdd(), req.GetDrain(), req.GetWeights()),
		MaxMoves:  int(req.GetMaxMoves()),
		Operator:  s.operator(ctx, req.GetOperator()),
		Reason:    req.GetReason(),
		BalanceBy: by,
		Tolerance: req.GetTolerance(),
		MaxBytes:  int64(min(req.GetMaxBytes(), 1<<62)),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.PlanResponse{Plan: planProto(p, true, nil)}, nil
}

// SubmitPlan implements slotdv1.AdminServer.
func (s *AdminServer) SubmitPlan(ctx context.Context, req *slotdv1.SubmitPlanRequest) (*slotdv1.SubmitPlanResponse, error) {
	if req.GetPlan() == nil {
		return nil, invalid("submit plan: no plan; pass the plan file's plan")
	}
	p, err := s.ctl.Submit(ctx, PlanFromProto(req.GetPlan()), s.operator(ctx, req.GetOperator()))
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.SubmitPlanResponse{Plan: planProto(p, true, nil)}, nil
}

// ListPlans implements slotdv1.AdminServer.
func (s *AdminServer) ListPlans(ctx context.Context, _ *slotdv1.ListPlansRequest) (*slotdv1.ListPlansResponse, error) {
	plans, err := s.ctl.List(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &slotdv1.ListPlansResponse{}
	for _, p := range plans {
		resp.Plans = append(resp.Plans, planProto(p, false, nil))
	}
	return resp, nil
}

// GetPlan implements slotdv1.AdminServer.
func (s *AdminServer) GetPlan(ctx context.Context, req *slotdv1.GetPlanRequest) (*slotdv1.GetPlanResponse, error) {
	if req.GetPlanId() == "" {
		return nil, invalid("get plan: plan id is empty")
	}
	p, err := s.ctl.Get(ctx, req.GetPlanId())
	if err != nil {
		return nil, toStatus(err)
	}
	var fl map[int]directory.Move
	if p.State.Active() {
		fl = s.inFlight(ctx)
	}
	return &slotdv1.GetPlanResponse{Plan: planProto(p, true, fl)}, nil
}

// planCall runs one of the plan state changes that take a plan id.
func (s *AdminServer) planCall(ctx context.Context, what, id string, fn func() (*mover.Plan, error)) (*slotdv1.Plan, error) {
	if id == "" {
		return nil, invalid(what + ": plan id is empty")
	}
	p, err := fn()
	if err != nil {
		return nil, toStatus(err)
	}
	return planProto(p, true, nil), nil
}

// Apply implements slotdv1.AdminServer.
func (s *AdminServer) Apply(ctx context.Context, req *slotdv1.ApplyRequest) (*slotdv1.ApplyResponse, error) {
	ctx, op := s.audited(ctx, directory.AuditPlan, directory.ActionApply, req.GetPlanId(), "", req.GetOperator())
	p, err := s.planCall(ctx, "apply", req.GetPlanId(), func() (*mover.Plan, error) {
		return s.ctl.Apply(ctx, req.GetPlanId(), op)
	})
	if err != nil {
		return nil, err
	}
	return &slotdv1.ApplyResponse{Plan: p}, nil
}

// Pause implements slotdv1.AdminServer.
func (s *AdminServer) Pause(ctx context.Context, req *slotdv1.PauseRequest) (*slotdv1.PauseResponse, error) {
	op := s.operator(ctx, req.GetOperator())
	e := directory.AuditEntry{Kind: directory.AuditPlan, Action: directory.ActionPause, PlanID: req.GetPlanId(), By: op, Reason: reasonOf(ctx)}
	if req.GetAbortCurrent() {
		e.Detail = "abort the move in flight"
	}
	ctx = directory.WithAudit(ctx, e)
	p, err := s.planCall(ctx, "pause", req.GetPlanId(), func() (*mover.Plan, error) {
		return s.ctl.Pause(ctx, req.GetPlanId(), req.GetAbortCurrent(), op)
	})
	if err != nil {
		return nil, err
	}
	return &slotdv1.PauseResponse{Plan: p}, nil
}

// Resume implements slotdv1.AdminServer.
func (s *AdminServer) Resume(ctx context.Context, req *slotdv1.ResumeRequest) (*slotdv1.ResumeResponse, error) {
	ctx, op := s.audited(ctx, directory.AuditPlan, directory.ActionResume, req.GetPlanId(), "", req.GetOperator())
	p, err := s.planCall(ctx, "resume", req.GetPlanId(), func() (*mover.Plan, error) {
		return s.ctl.Resume(ctx, req.GetPlanId(), op)
	})
	if err != nil {
		return nil, err
	}
	return &slotdv1.ResumeResponse{Plan: p}, nil
}

// Cancel implements slotdv1.AdminServer.
func (s *AdminServer) Cancel(ctx context.Context, req *slotdv1.CancelRequest) (*slotdv1.CancelResponse, error) {
	ctx, op := s.audited(ctx, directory.AuditPlan, directory.ActionCancel, req.GetPlanId(), "", req.GetOperator())
	p, err := s.planCall(ctx, "cancel", req.GetPlanId(), func() (*mover.Plan, error) {
		return s.ctl.Cancel(ctx, req.GetPlanId(), op)
	})
	if err != nil {
		return nil, err
	}
	return &slotdv1.CancelResponse{Plan: p}, nil
}

// Rollback implements slotdv1.AdminServer.
func (s *AdminServer) Rollback(ctx context.Context, req *slotdv1.RollbackRequest) (*slotdv1.RollbackResponse, error) {
	op := s.operator(ctx, req.GetOperator())
	ctx = directory.WithAudit(ctx, directory.AuditEntry{Kind: directory.AuditPlan, Action: directory.ActionRollback,
		PlanID: req.GetPlanId(), By: op, Reason: cmp.Or(req.GetReason(), reasonOf(ctx)), Detail: "reverse plan rb-" + req.GetPlanId()})
	p, err := s.planCall(ctx, "rollback", req.GetPlanId(), func() (*mover.Plan, error) {
		return s.ctl.Rollback(ctx, req.GetPlanId(), op, req.GetReason())
	})
	if err != nil {
		return nil, err
	}
	return &slotdv1.RollbackResponse{Plan: p}, nil
}

// Move implements slotdv1.AdminServer.
func (s *AdminServer) Move(ctx context.Context, req *slotdv1.MoveRequest) (*slotdv1.MoveResponse, error) {
	if _, err := slotOf(req.GetSlot()); err != nil {
		return nil, toStatus(fmt.Errorf("move: %w", err))
	}
	if req.GetTo() == "" {
		return nil, invalid("move: target node id is empty")
	}
	op := s.operator(ctx, req.GetOperator())
	ctx = directory.WithAudit(ctx, directory.AuditEntry{Kind: directory.AuditPlan, Action: directory.ActionMove,
		By: op, Reason: cmp.Or(req.GetReason(), reasonOf(ctx)), Detail: fmt.Sprintf("slot %d to %s", req.GetSlot(), req.GetTo())})
	p, err := s.ctl.MoveSlot(ctx, int(req.GetSlot()), req.GetTo(), op, req.GetReason())
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.MoveResponse{Plan: planProto(p, true, nil)}, nil
}

// SetThrottle implements slotdv1.AdminServer.
func (s *AdminServer) SetThrottle(ctx context.Context, req *slotdv1.SetThrottleRequest) (*slotdv1.SetThrottleResponse, error) {
	if req.GetNodeId() != "" {
		return nil, invalid("throttle: per-node rates are not supported; leave node_id empty to set the rate of every donor")
	}
	if req.GetBytesPerSecond() > 1<<62 {
		return nil, invalid(fmt.Sprintf("throttle: %d bytes/s is too large", req.GetBytesPerSecond()))
	}
	ctx, op := s.audited(ctx, directory.AuditCluster, directory.ActionThrottle, "", "", req.GetOperator())
	if err := s.ctl.SetThrottle(ctx, int64(req.GetBytesPerSecond()), op); err != nil {
		return nil, toStatus(err)
	}
	t, err := s.throttle(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.SetThrottleResponse{Throttle: t}, nil
}

func (s *AdminServer) throttle(ctx context.Context) (*slotdv1.Throttle, error) {
	v, err := s.ctl.Throttle(ctx)
	if err != nil {
		return nil, err
	}
	return &slotdv1.Throttle{DefaultBytesPerSecond: uint64(max(v, 0))}, nil
}

// Status implements slotdv1.AdminServer. It works before bootstrap (no
// slot counts then).
func (s *AdminServer) Status(ctx context.Context, _ *slotdv1.StatusRequest) (*slotdv1.StatusResponse, error) {
	resp := &slotdv1.StatusResponse{Server: s.cfg.ServerID}
	snap, err := s.dir.Snapshot(ctx)
	var nodes []directory.Node
	var counts map[string]int
	switch {
	case err == nil:
		resp.Version, nodes, counts = snap.Version, snap.Nodes, snap.Counts()
	case errors.Is(err, directory.ErrNotBootstrapped):
		if nodes, resp.Version, err = s.dir.Nodes(ctx); err != nil {
			return nil, toStatus(err)
		}
	default:
		return nil, toStatus(err)
	}
	if resp.Throttle, err = s.throttle(ctx); err != nil {
		return nil, toStatus(err)
	}
	active, err := s.ctl.Active(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	flight := map[int]directory.Move{}
	if snap != nil {
		for _, m := range snap.Moves {
			flight[m.Slot.Int()] = m
		}
	}
	if active != nil {
		resp.ActivePlan = planProto(active, true, flight)
	}
	var copied map[string]int64
	if s.cfg.Mover != nil {
		if resp.MoverLeader, err = s.cfg.Mover.Leader(ctx); err != nil {
			s.lg.Warn("status: mover leader unknown", "err", err)
		}
		copied = map[string]int64{}
		for _, p := range s.cfg.Mover.InFlight() {
			copied[p.MoveID] = p.Bytes
		}
	}
	if snap != nil {
		for _, m := range snap.Moves {
			resp.InFlight = append(resp.InFlight, &slotdv1.PlannedMove{
				Id: m.MoveID, Slot: uint32(m.Slot.Uint16()), From: m.From, To: m.To, Reason: m.Reason,
				Phase: phaseProto(m.Phase), StartedAt: ts(m.Started), PlanId: m.PlanID,
				BytesCopied: uint64(max(copied[m.MoveID], 0)),
			})
		}
	}
	pn := make([]*slotdv1.Node, 0, len(nodes))
	for _, n := range nodes {
		pn = append(pn, nodeProto(n))
	}
	resp.Nodes = clusterstatus.SlotLines(pn, counts)
	if resp.Replicas, err = s.replicaStatus(ctx, snap, nodes); err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// History implements slotdv1.AdminServer.
func (s *AdminServer) History(ctx context.Context, req *slotdv1.HistoryRequest) (*slotdv1.HistoryResponse, error) {
	limit := int(req.GetLimit())
	switch {
	case limit == 0:
		limit = DefaultHistoryLimit
	case limit > maxHistoryLimit:
		return nil, invalid(fmt.Sprintf("history: limit %d is more than %d", limit, maxHistoryLimit))
	}
	// The directory keeps a bounded history; read it all and page here.
	all, err := s.dir.History(ctx, 0)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &slotdv1.HistoryResponse{}
	for _, c := range all {
		if c.Version <= req.GetSinceVersion() {
			continue
		}
		if id := req.GetPlanId(); id != "" && c.PlanID != id {
			continue
		}
		if id := req.GetNodeId(); id != "" && c.Node != id && c.From != id && c.To != id {
			continue
		}
		if len(resp.Entries) == limit {
			resp.NextSinceVersion = resp.Entries[limit-1].GetVersion()
			break
		}
		resp.Entries = append(resp.Entries, historyProto(c))
	}
	return resp, nil
}
