package grpcapi

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
)

// AutoServer serves the automatic balancer's policy and state from the
// directory; any replica answers, whichever one runs the balancer.
type AutoServer struct {
	slotdv1.UnimplementedAutoServer
	dir   *directory.Directory
	admin *AdminServer // names the caller as Admin does
	now   func() time.Time
}

var _ slotdv1.AutoServer = (*AutoServer)(nil)

// Status returns the policy and the balancer's state.
func (s *AutoServer) Status(ctx context.Context, _ *slotdv1.AutoStatusRequest) (*slotdv1.AutoStatusResponse, error) {
	return s.status(ctx)
}

// SetPolicy changes the fields the request sets.
func (s *AutoServer) SetPolicy(ctx context.Context, req *slotdv1.SetAutoPolicyRequest) (*slotdv1.AutoStatusResponse, error) {
	if w := req.GetWindow(); w != nil && w.CheckValid() != nil {
		return nil, invalid("window: " + w.CheckValid().Error())
	}
	if i := req.GetInterval(); i != nil && i.CheckValid() != nil {
		return nil, invalid("interval: " + i.CheckValid().Error())
	}
	const maxInt = int64(^uint64(0) >> 1)
	if req.GetBudgetMovesPerHour() > uint64(1<<31-1) || req.GetBudgetBytesPerHour() > uint64(maxInt) {
		return nil, invalid("budget out of range")
	}
	by := s.admin.operator(ctx, req.GetOperator())
	_, err := s.dir.UpdateAutoPolicy(ctx, by, req.GetReason(), func(p *directory.AutoPolicy) error {
		if req.Enabled != nil {
			p.Enabled = req.GetEnabled()
		}
		if req.Frozen != nil {
			p.Frozen = req.GetFrozen()
		}
		if req.Tolerance != nil {
			p.Tolerance = req.GetTolerance()
		}
		if req.Window != nil {
			p.Window = req.GetWindow().AsDuration()
		}
		if req.Interval != nil {
			p.Interval = req.GetInterval().AsDuration()
		}
		if req.BudgetMovesPerHour != nil {
			p.BudgetMoves = int(req.GetBudgetMovesPerHour())
		}
		if req.BudgetBytesPerHour != nil {
			p.BudgetBytes = int64(req.GetBudgetBytesPerHour())
		}
		if req.BalanceBy != nil {
			p.BalanceBy = req.GetBalanceBy()
		}
		return nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return s.status(ctx)
}

func (s *AutoServer) status(ctx context.Context) (*slotdv1.AutoStatusResponse, error) {
	p, err := s.dir.AutoPolicy(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	st, _, err := s.dir.AutoState(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.AutoStatusResponse{Policy: autoPolicyProto(p), State: autoStateProto(p, st, s.now())}, nil
}

func autoPolicyProto(p directory.AutoPolicy) *slotdv1.AutoPolicy {
	out := &slotdv1.AutoPolicy{
		Enabled: p.Enabled, Frozen: p.Frozen, Tolerance: p.Tolerance,
		Window: durationpb.New(p.Window), Interval: durationpb.New(p.Interval),
		BudgetMovesPerHour: uint64(p.BudgetMoves), BudgetBytesPerHour: uint64(p.BudgetBytes),
		BalanceBy: p.BalanceBy, UpdatedBy: p.UpdatedBy, Reason: p.Reason,
	}
	if !p.Updated.IsZero() {
		out.Updated = timestamppb.New(p.Updated)
	}
	return out
}

// autoStateProto says what the balancer is doing: the policy's switches
// first (they take effect at its next tick), then a backoff in force, then
// the kind of its latest decision.
func autoStateProto(p directory.AutoPolicy, st directory.AutoState, now time.Time) *slotdv1.AutoState {
	out := &slotdv1.AutoState{
		State: st.DecisionKind, Decision: st.Decision, Failures: uint32(st.Failures),
		LastPlan: st.LastPlan, Leader: st.Leader,
	}
	switch {
	case !p.Enabled:
		out.State = "off"
	case p.Frozen:
		out.State = "frozen"
	case st.BackoffUntil.After(now):
		out.State = "backoff"
	case out.State == "" || out.State == "off" || out.State == "frozen":
		// On (again) or unfrozen since the balancer's last decision.
		out.State, out.Decision = "starting", "on: the leader's balancer decides at its next tick"
	}
	if !st.DecidedAt.IsZero() {
		out.DecidedAt = timestamppb.New(st.DecidedAt)
	}
	if !st.BackoffUntil.IsZero() {
		out.BackoffUntil = timestamppb.New(st.BackoffUntil)
		if d := st.BackoffUntil.Sub(now); d > 0 {
			out.Backoff = durationpb.New(d)
		}
	}
	if !st.LastPlanAt.IsZero() {
		out.LastPlanAt = timestamppb.New(st.LastPlanAt)
	}
	for _, r := range st.Recent {
		if now.Sub(r.At) < time.Hour {
			out.MovesLastHour += uint64(r.Moves)
			out.BytesLastHour += uint64(r.Bytes)
		}
	}
	return out
}
