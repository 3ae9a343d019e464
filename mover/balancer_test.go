package mover

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

// setPolicy edits the stored auto policy or fails the test.
func setPolicy(t *testing.T, c *cluster, edit func(*directory.AutoPolicy)) {
	t.Helper()
	if _, err := c.dir.UpdateAutoPolicy(c.ctx, "tester", "", func(p *directory.AutoPolicy) error { edit(p); return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestBalancer runs the balancer room against real etcd, real stores and a
// real executor, one tick at a time: off by default; on, it fills a new
// node with no command until the hourly budget is spent; frozen, it plans
// nothing for a draining node; unfrozen, it empties it; an operator's
// cancel wins and restarts the interval.
func TestBalancer(t *testing.T) {
	c := newCluster(t, 3)
	c.startExecutor("m1")
	reg := prometheus.NewPedanticRegistry()
	b, err := NewBalancer(BalancerConfig{Directory: c.dir, Control: c.ctl, Name: "s1", Logger: testLogger(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	tick := func(want autoKind) autoDecision {
		t.Helper()
		d, err := b.tick(c.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind != want {
			t.Fatalf("decided %s (%q), want %s", d.Kind, d.Reason, want)
		}
		return d
	}
	planCount := func() int {
		ps, err := c.ctl.List(c.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ps)
	}

	c.addNode("n4")
	tick(autoOff)
	if n := planCount(); n != 0 {
		t.Fatalf("off: %d plans stored", n)
	}

	setPolicy(t, c, func(p *directory.AutoPolicy) { p.Enabled, p.Interval, p.Window, p.BudgetMoves = true, 0, 0, 6 })
	d := tick(autoPlan)
	if d.Reason != "auto: fill new node n4" || d.Trigger != "fill" {
		t.Fatalf("decision %+v", d)
	}
	st, _, err := c.dir.AutoState(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := c.waitPlan(st.LastPlan, StateDone)
	if p.Operator != autoOperator || p.Reason != "auto: fill new node n4" || len(p.Moves) != 6 {
		t.Fatalf("automatic plan %s by %q (%q), %d moves", p.ID, p.Operator, p.Reason, len(p.Moves))
	}
	for _, m := range p.Moves {
		if m.To != "n4" || m.Status != MoveDone {
			t.Fatalf("move %+v", m)
		}
	}
	// The automatic apply is in the audit log, by auto, with its reason.
	audit, err := c.dir.Audit(c.ctx, directory.AuditQuery{Kind: directory.AuditPlan})
	if err != nil || len(audit) == 0 || audit[0].Action != directory.ActionApply || audit[0].PlanID != p.ID ||
		audit[0].By != autoOperator || audit[0].Reason != "auto: fill new node n4" {
		t.Fatalf("plan audit log %+v, %v; want the automatic apply of %s", audit, err, p.ID)
	}
	// The budget of 6 moves an hour is spent: n4 is still far below its
	// share, but nothing more is planned.
	d = tick(autoWaiting)
	if !strings.Contains(d.Reason, "hourly budget spent (6 of 6 moves") {
		t.Fatalf("reason %q", d.Reason)
	}
	if got := testutil.ToFloat64(b.m.plans.WithLabelValues("fill")); got != 1 {
		t.Fatalf("slotd_balancer_plans_total{trigger=fill} = %v", got)
	}

	// Frozen: a draining node waits.
	setPolicy(t, c, func(p *directory.AutoPolicy) { p.Frozen, p.BudgetMoves = true, 0 })
	if _, err := c.dir.Drain(c.ctx, "n4", "test", "tester"); err != nil {
		t.Fatal(err)
	}
	before := planCount()
	tick(autoFrozen)
	tick(autoFrozen)
	if n := planCount(); n != before {
		t.Fatalf("frozen: %d plans, had %d", n, before)
	}
	if got := testutil.ToFloat64(b.m.state.WithLabelValues(string(autoFrozen))); got != 1 {
		t.Fatalf("slotd_balancer_state{state=frozen} = %v", got)
	}

	// Unfrozen: it empties n4.
	setPolicy(t, c, func(p *directory.AutoPolicy) { p.Frozen = false })
	d = tick(autoPlan)
	if d.Trigger != "drain" || d.Reason != "auto: n4 draining, 6 slots to move" {
		t.Fatalf("decision %+v", d)
	}
	st, _, _ = c.dir.AutoState(c.ctx)
	c.waitPlan(st.LastPlan, StateDone)
	snap, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Counts()["n4"]; got != 0 {
		t.Fatalf("n4 owns %d slots after the automatic drain", got)
	}
	setPolicy(t, c, func(p *directory.AutoPolicy) { p.Interval = time.Hour })
	tick(autoWaiting) // the interval

	// An operator's plan, cancelled by the operator: the interval runs
	// from the cancel, not from the last automatic plan.
	setPolicy(t, c, func(p *directory.AutoPolicy) { p.Interval = time.Minute })
	op, err := c.ctl.Propose(c.ctx, PlanRequest{MaxMoves: 1, Operator: "alice", Edits: Edits{Drain: []string{"n3"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ctl.Apply(c.ctx, op.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ctl.Cancel(c.ctx, op.ID, "alice"); err != nil && !errors.Is(err, ErrPrecondition) {
		t.Fatal(err)
	}
	waitfor.Err(c.t, 30*time.Second, "no active plan", func() error {
		if a, err := c.ctl.Active(c.ctx); err != nil || a != nil {
			return errors.New("a plan is active")
		}
		return nil
	})
	d = tick(autoWaiting)
	if !strings.Contains(d.Reason, "an operator's action") {
		t.Fatalf("after the operator's cancel: %q", d.Reason)
	}

	// Run stops with its context (the leader's term) and leaves the state
	// gauges at 0.
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	if got := testutil.ToFloat64(b.m.state.WithLabelValues(string(autoWaiting))); got != 0 {
		t.Fatalf("after Run: slotd_balancer_state{state=waiting} = %v", got)
	}
}

// balancerClock is a clock that moves only when told. Safe for concurrent use.
type balancerClock struct{ now atomic.Pointer[time.Time] }

func (c *balancerClock) Now() time.Time { return *c.now.Load() }
func (c *balancerClock) Add(d time.Duration) {
	t := c.Now().Add(d)
	c.now.Store(&t)
}

// TestBalancerBacksOff: the store of a new node is away, so the automatic
// plan that fills it pauses on a failed move; the balancer backs off
// (status and metrics say so), cancels the plan when the backoff ends, and
// backs off longer after the next failure.
func TestBalancerBacksOff(t *testing.T) {
	c := newCluster(t, 3)
	c.startExecutor("m1")
	clock := &balancerClock{}
	start := time.Now()
	clock.now.Store(&start)
	reg := prometheus.NewPedanticRegistry()
	b, err := NewBalancer(BalancerConfig{Directory: c.dir, Control: c.ctl, Name: "s1", Logger: testLogger(), Registerer: reg, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	c.addNode("n4").stop()
	setPolicy(t, c, func(p *directory.AutoPolicy) {
		p.Enabled, p.Interval, p.Window, p.BudgetMoves = true, time.Minute, 0, 2
	})
	var d autoDecision
	for i, want := range []struct {
		kind    autoKind
		advance time.Duration
		backoff time.Duration
	}{
		{kind: autoPlan},
		{kind: autoBackoff, advance: time.Second, backoff: time.Minute},
		{kind: autoCancel, advance: time.Minute},
		// The cancelled plan moved nothing, so it spent none of the budget.
		{kind: autoPlan, advance: time.Second},
		{kind: autoBackoff, advance: time.Second, backoff: 2 * time.Minute},
	} {
		clock.Add(want.advance)
		if want.kind == autoBackoff && want.backoff > 0 {
			// Wait until the executor paused the plan on its failed move.
			st, _, _ := c.dir.AutoState(c.ctx)
			p := c.waitPlan(st.LastPlan, StatePaused)
			if p.Error == "" || p.Operator != autoOperator {
				t.Fatalf("step %d: plan %s paused with no error (%+v)", i, p.ID, p)
			}
		}
		if d, err = b.tick(c.ctx); err != nil {
			t.Fatal(err)
		}
		if d.Kind != want.kind {
			t.Fatalf("step %d: decided %s (%q), want %s", i, d.Kind, d.Reason, want.kind)
		}
		if want.backoff > 0 {
			if got := d.State.BackoffUntil.Sub(clock.Now()); got != want.backoff {
				t.Fatalf("step %d: backoff %v, want %v", i, got, want.backoff)
			}
			if got := testutil.ToFloat64(b.m.backoff); got != want.backoff.Seconds() {
				t.Fatalf("step %d: slotd_balancer_backoff_seconds %v", i, got)
			}
		}
		if want.kind == autoCancel {
			c.waitPlan(d.Cancel, StateCancelled)
		}
	}
	st, _, err := c.dir.AutoState(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Failures != 2 || st.DecisionKind != string(autoBackoff) || !strings.Contains(st.Decision, "backing off 2m (failure 2)") {
		t.Fatalf("stored state %+v", st)
	}
}

// TestBalancerPlanIsReversible: an automatic plan is an ordinary plan, so
// an operator rolls it back like any other; the rollback is an operator's
// action, so the balancer waits a whole interval before planning again.
func TestBalancerPlanIsReversible(t *testing.T) {
	c := newCluster(t, 3)
	c.startExecutor("m1")
	b, err := NewBalancer(BalancerConfig{Directory: c.dir, Control: c.ctl, Name: "s1", Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	c.addNode("n4")
	setPolicy(t, c, func(p *directory.AutoPolicy) { p.Enabled, p.Interval, p.Window, p.BudgetMoves = true, 0, 0, 4 })
	d, err := b.tick(c.ctx)
	if err != nil || d.Kind != autoPlan {
		t.Fatalf("decided %s (%q), %v; want a plan", d.Kind, d.Reason, err)
	}
	st, _, err := c.dir.AutoState(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	auto := c.waitPlan(st.LastPlan, StateDone)
	rb, err := c.ctl.Rollback(c.ctx, auto.ID, "alice", "undo the automatic fill")
	if err != nil {
		t.Fatal(err)
	}
	c.waitPlan(rb.ID, StateDone)
	snap, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := snap.Counts()["n4"]; n != 0 {
		t.Fatalf("n4 owns %d slots after the rollback of %s", n, auto.ID)
	}
	for _, m := range auto.Moves {
		if got := snap.Owner(slots.MustNew(m.Slot)); got != m.From {
			t.Fatalf("slot %d owned by %s after the rollback, want %s", m.Slot, got, m.From)
		}
	}
	setPolicy(t, c, func(p *directory.AutoPolicy) { p.Interval, p.BudgetMoves = time.Hour, 0 })
	if d, err = b.tick(c.ctx); err != nil || d.Kind != autoWaiting || !strings.Contains(d.Reason, "an operator's action") {
		t.Fatalf("after the rollback: %s (%q), %v; want waiting out the interval after an operator's action", d.Kind, d.Reason, err)
	}
}
