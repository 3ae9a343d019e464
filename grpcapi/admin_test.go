package grpcapi

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

// TestPlanLifecycle drives the plan calls without an executor: the plan
// records change state, nothing moves.
func TestPlanLifecycle(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	bootstrap(t, d)
	srv := startServer(t, d, "127.0.0.1:0", nil)
	ac := slotdv1.NewAdminClient(dial(t, srv.addr()))
	ctx := testCtx(t)

	planned, err := ac.Plan(ctx, &slotdv1.PlanRequest{
		Add:      []*slotdv1.NodeSpec{{Id: "d", Address: "127.0.0.1:7004", Weight: 1}},
		Operator: "alice", Reason: "grow",
	})
	if err != nil {
		t.Fatal(err)
	}
	p := planned.GetPlan()
	// Four equal nodes: d gets about a quarter of the slots, all from a, b, c.
	if n := len(p.GetMoves()); n < slots.Count/4-3 || n > slots.Count/4+3 {
		t.Fatalf("plan has %d moves, want about %d", n, slots.Count/4)
	}
	if p.GetState() != slotdv1.PlanState_PLAN_STATE_PROPOSED || p.GetOperator() != "alice" ||
		len(p.GetEdits().GetAdd()) != 1 || p.GetProgress().GetPending() != uint32(len(p.GetMoves())) {
		t.Fatalf("plan: state %v operator %q edits %v progress %v", p.GetState(), p.GetOperator(), p.GetEdits(), p.GetProgress())
	}
	for _, m := range p.GetMoves() {
		if m.GetTo() != "d" || m.GetPhase() != slotdv1.MovePhase_MOVE_PHASE_PENDING || m.GetReason() == "" {
			t.Fatalf("move %v: want pending to d with a reason", m)
		}
	}

	// The plan file round trip: the same moves under another id.
	file := &slotdv1.Plan{Id: "from-file", BaseVersion: p.GetBaseVersion(), Edits: p.GetEdits(), Moves: p.GetMoves()[:3], Reason: "by hand"}
	sub, err := ac.SubmitPlan(ctx, &slotdv1.SubmitPlanRequest{Plan: file, Operator: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if got := sub.GetPlan(); got.GetId() != "from-file" || len(got.GetMoves()) != 3 || got.GetState() != slotdv1.PlanState_PLAN_STATE_PROPOSED {
		t.Fatalf("submitted plan %s: %d moves, state %v", got.GetId(), len(got.GetMoves()), got.GetState())
	}
	list, err := ac.ListPlans(ctx, &slotdv1.ListPlansRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetPlans()) != 2 || len(list.GetPlans()[0].GetMoves()) != 0 {
		t.Fatalf("list: %d plans (want 2, without moves)", len(list.GetPlans()))
	}

	applied, err := ac.Apply(ctx, &slotdv1.ApplyRequest{PlanId: "from-file", Operator: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if applied.GetPlan().GetState() != slotdv1.PlanState_PLAN_STATE_APPLYING {
		t.Fatalf("applied plan is %v", applied.GetPlan().GetState())
	}
	// One plan at a time.
	if _, err := ac.Apply(ctx, &slotdv1.ApplyRequest{PlanId: p.GetId()}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("second apply: %v, want FailedPrecondition", err)
	}

	if _, err := ac.SetThrottle(ctx, &slotdv1.SetThrottleRequest{BytesPerSecond: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	st, err := ac.Status(ctx, &slotdv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetActivePlan().GetId() != "from-file" || st.GetThrottle().GetDefaultBytesPerSecond() != 1<<20 || st.GetServer() != "s1" {
		t.Errorf("status: active %q throttle %d server %q", st.GetActivePlan().GetId(), st.GetThrottle().GetDefaultBytesPerSecond(), st.GetServer())
	}
	loads := map[string]*slotdv1.NodeLoad{}
	total := uint32(0)
	for _, l := range st.GetNodes() {
		loads[l.GetNode().GetId()] = l
		total += l.GetSlots()
	}
	// Apply registered d; it owns nothing yet, so a, b, c are over target.
	if total != slots.Count || loads["d"] == nil || loads["d"].GetSlots() != 0 || loads["d"].GetTargetSlots() == 0 || loads["a"].GetLoad() <= 1 {
		t.Errorf("status nodes: %v", st.GetNodes())
	}

	for _, step := range []struct {
		name string
		call func() (*slotdv1.Plan, error)
		want slotdv1.PlanState
	}{
		{"pause", func() (*slotdv1.Plan, error) {
			r, err := ac.Pause(ctx, &slotdv1.PauseRequest{PlanId: "from-file"})
			return r.GetPlan(), err
		}, slotdv1.PlanState_PLAN_STATE_PAUSED},
		{"resume", func() (*slotdv1.Plan, error) {
			r, err := ac.Resume(ctx, &slotdv1.ResumeRequest{PlanId: "from-file"})
			return r.GetPlan(), err
		}, slotdv1.PlanState_PLAN_STATE_APPLYING},
		{"cancel", func() (*slotdv1.Plan, error) {
			r, err := ac.Cancel(ctx, &slotdv1.CancelRequest{PlanId: "from-file"})
			return r.GetPlan(), err
		}, slotdv1.PlanState_PLAN_STATE_CANCELLED},
	} {
		got, err := step.call()
		if err != nil || got.GetState() != step.want {
			t.Fatalf("%s: %v, state %v; want %v", step.name, err, got.GetState(), step.want)
		}
	}
	// A cancelled plan that moved nothing rolls back to an empty plan.
	rb, err := ac.Rollback(ctx, &slotdv1.RollbackRequest{PlanId: "from-file"})
	if err != nil {
		t.Fatal(err)
	}
	if rb.GetPlan().GetRollbackOf() != "from-file" || len(rb.GetPlan().GetMoves()) != 0 {
		t.Errorf("rollback plan %v", rb.GetPlan())
	}
	got, err := ac.GetPlan(ctx, &slotdv1.GetPlanRequest{PlanId: "from-file"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetPlan().GetState() != slotdv1.PlanState_PLAN_STATE_ROLLED_BACK || got.GetPlan().GetRolledBackBy() != rb.GetPlan().GetId() {
		t.Errorf("plan after rollback: %v by %q", got.GetPlan().GetState(), got.GetPlan().GetRolledBackBy())
	}

	h, err := ac.History(ctx, &slotdv1.HistoryRequest{NodeId: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GetEntries()) == 0 || h.GetEntries()[0].GetKind() != slotdv1.HistoryKind_HISTORY_KIND_NODE_ADDED {
		t.Errorf("history of d: %v", h.GetEntries())
	}
	page, err := ac.History(ctx, &slotdv1.HistoryRequest{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.GetEntries()) != 1 || page.GetNextSinceVersion() != page.GetEntries()[0].GetVersion() {
		t.Errorf("history page: %v next %d", page.GetEntries(), page.GetNextSinceVersion())
	}
}

func TestNodeCalls(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	bootstrap(t, d)
	srv := startServer(t, d, "127.0.0.1:0", nil)
	ac := slotdv1.NewAdminClient(dial(t, srv.addr()))
	dc := slotdv1.NewDirectoryClient(dial(t, srv.addr()))
	ctx := testCtx(t)

	reg, err := ac.RegisterNode(ctx, &slotdv1.RegisterNodeRequest{Node: &slotdv1.Node{Id: "e", Address: "127.0.0.1:7005", Zone: "z1"}})
	if err != nil {
		t.Fatal(err)
	}
	if reg.GetNode().GetWeight() != 1 || reg.GetNode().GetState() != slotdv1.NodeState_NODE_STATE_ACTIVE {
		t.Errorf("registered %v", reg.GetNode())
	}
	if _, err := ac.SetWeight(ctx, &slotdv1.SetWeightRequest{NodeId: "e", Weight: 3}); err != nil {
		t.Fatal(err)
	}
	// Re-registering (a restart, new address) keeps the weight.
	again, err := ac.RegisterNode(ctx, &slotdv1.RegisterNodeRequest{Node: &slotdv1.Node{Id: "e", Address: "127.0.0.1:7006", Zone: "z1", Weight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if again.GetNode().GetWeight() != 3 || again.GetNode().GetAddress() != "127.0.0.1:7006" {
		t.Errorf("re-registered %v; want weight 3 at the new address", again.GetNode())
	}
	up, err := ac.UpdateAddr(ctx, &slotdv1.UpdateAddrRequest{NodeId: "e", Address: "127.0.0.1:7007"})
	if err != nil || up.GetNode().GetAddress() != "127.0.0.1:7007" {
		t.Fatalf("update address: %v %v", up, err)
	}
	eventually(t, "ListNodes shows e", func() bool {
		l, err := dc.ListNodes(ctx, &slotdv1.ListNodesRequest{})
		if err != nil {
			return false
		}
		for _, n := range l.GetNodes() {
			if n.GetNode().GetId() == "e" {
				return n.GetNode().GetAddress() == "127.0.0.1:7007" && n.GetSlots() == 0
			}
		}
		return false
	})
	before := time.Now()
	hb, err := ac.Heartbeat(ctx, &slotdv1.HeartbeatRequest{NodeId: "e", Session: again.GetSession(), LeaseId: again.GetLeaseId()})
	if err != nil || hb.GetState() != slotdv1.NodeState_NODE_STATE_ACTIVE || hb.GetVersion() == 0 {
		t.Fatalf("heartbeat: %v %v", hb, err)
	}
	if reg.GetTtl().AsDuration() <= reg.GetLeaseMargin().AsDuration() || reg.GetLeaseMargin().AsDuration() <= 0 ||
		reg.GetHeartbeatInterval().AsDuration() >= reg.GetTtl().AsDuration()-reg.GetLeaseMargin().AsDuration() {
		t.Fatalf("register: ttl %v margin %v interval %v", reg.GetTtl().AsDuration(), reg.GetLeaseMargin().AsDuration(), reg.GetHeartbeatInterval().AsDuration())
	}
	// The lease of the first registration was replaced by the second:
	// renewing it is refused.
	if _, err := ac.Heartbeat(ctx, &slotdv1.HeartbeatRequest{NodeId: "e", LeaseId: reg.GetLeaseId()}); status.Code(err) != codes.NotFound {
		t.Fatalf("heartbeat with a replaced lease: %v, want NotFound (register again)", err)
	}
	// ListNodes shows the heartbeat, to the second (etcd keeps lease TTLs
	// in whole seconds, and the time is truncated): between the call and
	// now, give or take those two seconds.
	l, err := dc.ListNodes(ctx, &slotdv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	for _, n := range l.GetNodes() {
		last := n.GetLastHeartbeat()
		switch {
		case n.GetNode().GetId() == "e" && (last == nil || last.AsTime().Before(before.Add(-2*time.Second)) || last.AsTime().After(after)):
			t.Errorf("node e heartbeated just now; ListNodes says last heartbeat %v", last)
		case n.GetNode().GetId() == "e" && (n.GetLeaseGranted() == nil ||
			!n.GetLeaseExpires().AsTime().Equal(last.AsTime().Add(reg.GetTtl().AsDuration()-reg.GetLeaseMargin().AsDuration()))):
			t.Errorf("node e: lease granted %v expires %v, want expiry at last heartbeat %v + TTL - margin", n.GetLeaseGranted(), n.GetLeaseExpires(), last.AsTime())
		case n.GetNode().GetId() != "e" && (last != nil || n.GetLeaseExpires() != nil):
			t.Errorf("node %s never heartbeated; ListNodes says %v, lease until %v", n.GetNode().GetId(), last, n.GetLeaseExpires())
		}
	}
	if _, err := ac.RemoveNode(ctx, &slotdv1.RemoveNodeRequest{NodeId: "e"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Heartbeat(ctx, &slotdv1.HeartbeatRequest{NodeId: "e", LeaseId: again.GetLeaseId()}); status.Code(err) != codes.NotFound {
		t.Errorf("heartbeat of a removed node: %v, want NotFound (register again)", err)
	}
	refused := func(reason string) float64 {
		return testutil.ToFloat64(srv.svc.admin.leases.refused.WithLabelValues(reason))
	}
	if a, b, c := refused(refusedStale), refused(refusedNotRegistered), refused(refusedIdentity); a != 1 || b != 1 || c != 0 {
		t.Errorf("renewals refused: stale %v, not registered %v, identity %v; want 1, 1, 0", a, b, c)
	}

	// Answers come from the hub, which follows etcd a moment behind.
	eventually(t, "the hub has every change", func() bool {
		v, err := d.Version(ctx)
		return err == nil && srv.svc.hub.Current().Version() == v
	})
	lk, err := dc.Lookup(ctx, &slotdv1.LookupRequest{Target: &slotdv1.LookupRequest_Key{Key: []byte("{user:42}:cart")}})
	if err != nil {
		t.Fatal(err)
	}
	if want := slots.ForString("{user:42}:cart"); lk.GetSlot() != uint32(want.Uint16()) || lk.GetOwner() == "" || lk.GetAddress() == "" {
		t.Errorf("lookup: %v", lk)
	}
	gm, err := dc.GetMap(ctx, &slotdv1.GetMapRequest{IfNewerThan: lk.GetVersion()})
	if err != nil || !gm.GetUnchanged() || gm.GetMap() != nil {
		t.Errorf("GetMap if newer than the current version: %v %v; want unchanged", gm, err)
	}
}

func TestBeforeBootstrap(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	srv := startServer(t, d, "127.0.0.1:0", nil)
	conn := dial(t, srv.addr())
	ac, dc := slotdv1.NewAdminClient(conn), slotdv1.NewDirectoryClient(conn)
	ctx := testCtx(t)
	if _, err := ac.RegisterNode(ctx, &slotdv1.RegisterNodeRequest{Node: &slotdv1.Node{Id: "a", Address: "127.0.0.1:7001"}}); err != nil {
		t.Fatal(err)
	}
	gm, err := dc.GetMap(ctx, &slotdv1.GetMapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(gm.GetMap().GetNodes()) != 1 || gm.GetMap().GetOwnerBits() != 0 {
		t.Errorf("map before bootstrap: %v", gm.GetMap())
	}
	if _, err := dc.Lookup(ctx, &slotdv1.LookupRequest{Target: &slotdv1.LookupRequest_Slot{Slot: 1}}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("lookup before bootstrap: %v, want FailedPrecondition", err)
	}
	if _, err := ac.Status(ctx, &slotdv1.StatusRequest{}); err != nil {
		t.Errorf("status before bootstrap: %v", err)
	}
	// A watcher that connected before bootstrap gets the nodes at once and
	// the owners when the bootstrap lands.
	w, err := dc.WatchMap(ctx, &slotdv1.WatchMapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := w.Recv()
	if err != nil || u.GetFull().GetOwnerBits() != 0 {
		t.Fatalf("first update before bootstrap: %v %v", u, err)
	}
	b, err := ac.Bootstrap(ctx, &slotdv1.BootstrapRequest{Nodes: []*slotdv1.Node{{Id: "b", Address: "127.0.0.1:7002"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Bootstrap with nodes given uses those nodes.
	if len(b.GetMap().GetNodes()) != 2 || b.GetMap().GetOwnerBits() == 0 {
		t.Fatalf("bootstrap map: %d nodes, %d owner bits", len(b.GetMap().GetNodes()), b.GetMap().GetOwnerBits())
	}
	u, err = w.Recv()
	if err != nil || u.GetFull() == nil || u.GetFull().GetVersion() != b.GetMap().GetVersion() {
		t.Fatalf("update after bootstrap: %v %v; want the full map at version %d", u, err, b.GetMap().GetVersion())
	}
}
