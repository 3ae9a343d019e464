package mover

import (
	"strings"
	"testing"
	"time"

	"github.com/slotd/slotd/directory"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

func onPolicy() directory.AutoPolicy {
	p := directory.DefaultAutoPolicy()
	p.Enabled = true
	return p
}

func nodes3() []autoNode {
	return []autoNode{
		{ID: "n1", State: directory.NodeActive, Slots: 5461, Reported: true},
		{ID: "n2", State: directory.NodeActive, Slots: 5461, Reported: true},
		{ID: "n3", State: directory.NodeActive, Slots: 5462, Reported: true},
	}
}

func hot() []autoRatio {
	return []autoRatio{{"n1", "bytes", 0.8}, {"n2", "bytes", 1.62}, {"n3", "bytes", 0.58}, {"n2", "ops", 1.2}}
}

func plan(id, operator string, st PlanState, created, updated time.Time) *Plan {
	return &Plan{ID: id, Operator: operator, State: st, Created: created, Updated: updated}
}

func TestDecide(t *testing.T) {
	failedPlan := plan("a1", autoOperator, StatePaused, t0.Add(-time.Hour), t0.Add(-time.Minute))
	failedPlan.Error = "move 3 to n4: store unavailable"
	for _, tc := range []struct {
		name   string
		in     func(*autoInput)
		kind   autoKind
		reason string // a part of the decision's reason
		check  func(*testing.T, autoDecision)
	}{
		{name: "off by default", in: func(in *autoInput) { in.Policy = directory.DefaultAutoPolicy() }, kind: autoOff, reason: "off"},
		{name: "frozen wins over a drain", in: func(in *autoInput) {
			in.Policy.Frozen, in.Policy.Reason = true, "incident 4711"
			in.Nodes[1].State = directory.NodeDraining
		}, kind: autoFrozen, reason: "incident 4711"},
		{name: "balanced", kind: autoWatching, reason: "balanced within 10%"},
		{name: "inside the band", in: func(in *autoInput) { in.Ratios = []autoRatio{{"n1", "bytes", 1.09}, {"n2", "bytes", 0.91}} }, kind: autoWatching, reason: "balanced"},
		{name: "imbalance starts the window", in: func(in *autoInput) { in.Ratios = hot() }, kind: autoWatching,
			reason: "n2 bytes ratio 1.62 > 1.10 for 0s of 10m", check: func(t *testing.T, d autoDecision) {
				if !d.ImbalancedSince.Equal(t0) {
					t.Errorf("imbalanced since %v, want now", d.ImbalancedSince)
				}
			}},
		{name: "imbalance inside the window", in: func(in *autoInput) {
			in.Ratios, in.ImbalancedSince = hot(), t0.Add(-9*time.Minute-59*time.Second)
		}, kind: autoWatching, reason: "for 9m59s of 10m"},
		{name: "imbalance for the whole window plans", in: func(in *autoInput) {
			in.Ratios, in.ImbalancedSince = hot(), t0.Add(-10*time.Minute)
		}, kind: autoPlan, reason: "auto: n2 bytes ratio 1.62 > 1.10 for 10m", check: func(t *testing.T, d autoDecision) {
			if d.Trigger != "imbalance" || d.MaxMoves != 1024 || d.MaxBytes != 64<<30 || !d.ImbalancedSince.IsZero() {
				t.Errorf("decision %+v", d)
			}
		}},
		{name: "an underloaded node counts", in: func(in *autoInput) {
			in.Ratios, in.ImbalancedSince = []autoRatio{{"n1", "slots", 1.05}, {"n4", "slots", 0.5}}, t0.Add(-time.Hour)
		}, kind: autoPlan, reason: "auto: n4 slots ratio 0.50 < 0.90 for 10m"},
		{name: "tolerance from the policy", in: func(in *autoInput) {
			in.Policy.Tolerance, in.Ratios, in.ImbalancedSince = 0.7, hot(), t0.Add(-time.Hour)
		}, kind: autoWatching, reason: "balanced within 70%"},
		{name: "a draining node is emptied at once", in: func(in *autoInput) { in.Nodes[1].State = directory.NodeDraining }, kind: autoPlan,
			reason: "auto: n2 draining, 5461 slots to move", check: func(t *testing.T, d autoDecision) {
				if d.Trigger != "drain" {
					t.Errorf("trigger %q", d.Trigger)
				}
			}},
		{name: "an emptied draining node is left", in: func(in *autoInput) {
			in.Nodes[1].State, in.Nodes[1].Slots = directory.NodeDraining, 0
		}, kind: autoWatching, reason: "balanced"},
		{name: "a new node is filled once it reported", in: func(in *autoInput) {
			in.Nodes = append(in.Nodes, autoNode{ID: "n4", State: directory.NodeActive, Reported: true})
		}, kind: autoPlan, reason: "auto: fill new node n4"},
		{name: "a new node that has not reported waits", in: func(in *autoInput) {
			in.Nodes = append(in.Nodes, autoNode{ID: "n4", State: directory.NodeActive})
		}, kind: autoWatching, reason: "balanced"},
		{name: "a down node is not filled", in: func(in *autoInput) {
			in.Nodes = append(in.Nodes, autoNode{ID: "n4", State: directory.NodeDown, Reported: true})
		}, kind: autoWatching},
		{name: "no plan while a plan applies", in: func(in *autoInput) {
			in.Nodes[1].State = directory.NodeDraining
			in.Plans.Active = plan("p1", "alice", StateApplying, t0.Add(-time.Minute), t0.Add(-time.Minute))
		}, kind: autoWaiting, reason: "plan p1 is applying (by alice)"},
		{name: "no plan while a plan is paused", in: func(in *autoInput) {
			in.Ratios, in.ImbalancedSince = hot(), t0.Add(-time.Hour)
			in.Plans.Active = plan("p1", "alice", StatePaused, t0.Add(-time.Hour), t0.Add(-time.Hour))
		}, kind: autoWaiting, reason: "plan p1 is paused", check: func(t *testing.T, d autoDecision) {
			if !d.ImbalancedSince.IsZero() {
				t.Error("the window went on while a plan was paused")
			}
		}},
		{name: "the interval after an automatic plan", in: func(in *autoInput) {
			in.Nodes[1].State = directory.NodeDraining
			in.State.LastPlanAt = t0.Add(-4 * time.Minute)
		}, kind: autoWaiting, reason: "an automatic plan at 02:56:00: the interval (5m) runs 1m more"},
		{name: "the interval after an operator's action", in: func(in *autoInput) {
			in.Nodes[1].State = directory.NodeDraining
			in.State.LastPlanAt = t0.Add(-time.Hour)
			in.Plans.OperatorActionAt = t0.Add(-30 * time.Second)
		}, kind: autoWaiting, reason: "an operator's action at 02:59:30: the interval (5m) runs 4m30s more"},
		{name: "the window is watched during the interval", in: func(in *autoInput) {
			in.Ratios = hot()
			in.State.LastPlanAt = t0.Add(-time.Minute)
		}, kind: autoWaiting, check: func(t *testing.T, d autoDecision) {
			if !d.ImbalancedSince.Equal(t0) {
				t.Errorf("imbalanced since %v, want now", d.ImbalancedSince)
			}
		}},
		{name: "the interval ended", in: func(in *autoInput) {
			in.Nodes[1].State = directory.NodeDraining
			in.State.LastPlanAt = t0.Add(-5 * time.Minute)
		}, kind: autoPlan},
		{name: "budget left goes to the planner", in: func(in *autoInput) {
			in.Nodes[1].State = directory.NodeDraining
			in.Policy.BudgetMoves, in.Policy.BudgetBytes = 100, 1000
			in.State.Recent = []directory.AutoPlanSpend{
				{Plan: "old", At: t0.Add(-61 * time.Minute), Moves: 100, Bytes: 1000},
				{Plan: "a1", At: t0.Add(-30 * time.Minute), Moves: 30, Bytes: 200},
			}
		}, kind: autoPlan, check: func(t *testing.T, d autoDecision) {
			if d.MaxMoves != 70 || d.MaxBytes != 800 || len(d.State.Recent) != 1 {
				t.Errorf("max moves %d, bytes %d, recent %v; want 70, 800 and only a1", d.MaxMoves, d.MaxBytes, d.State.Recent)
			}
		}},
		{name: "budget spent", in: func(in *autoInput) {
			in.Nodes[1].State = directory.NodeDraining
			in.Policy.BudgetMoves = 100
			in.State.Recent = []directory.AutoPlanSpend{{Plan: "a1", At: t0.Add(-30 * time.Minute), Moves: 100}}
		}, kind: autoWaiting, reason: "hourly budget spent (100 of 100 moves, 0 of 68719476736 bytes): drain waits until 03:30:00"},
		{name: "bytes budget spent", in: func(in *autoInput) {
			in.Nodes[1].State = directory.NodeDraining
			in.Policy.BudgetBytes = 1000
			in.State.Recent = []directory.AutoPlanSpend{{Plan: "a1", At: t0.Add(-30 * time.Minute), Moves: 1, Bytes: 1000}}
		}, kind: autoWaiting, reason: "hourly budget spent"},
		{name: "a failed automatic plan backs off", in: func(in *autoInput) {
			in.Plans.Active, in.Plans.LastAuto = failedPlan, failedPlan
		}, kind: autoBackoff, reason: "automatic plan a1 paused: move 3 to n4: store unavailable; backing off 5m (failure 1)", check: func(t *testing.T, d autoDecision) {
			if d.State.Failures != 1 || !d.State.BackoffUntil.Equal(t0.Add(5*time.Minute)) || d.State.FailedPlan != "a1" {
				t.Errorf("state %+v", d.State)
			}
		}},
		{name: "a second failure doubles the backoff", in: func(in *autoInput) {
			in.Plans.Active, in.Plans.LastAuto = failedPlan, failedPlan
			in.State.Failures, in.State.FailedPlan = 1, "a0"
		}, kind: autoBackoff, reason: "backing off 10m (failure 2)"},
		{name: "the backoff is capped at an hour", in: func(in *autoInput) {
			in.Plans.Active, in.Plans.LastAuto = failedPlan, failedPlan
			in.State.Failures, in.State.FailedPlan = 30, "a0"
		}, kind: autoBackoff, reason: "backing off 1h (failure 31)"},
		{name: "inside the backoff", in: func(in *autoInput) {
			in.Plans.Active, in.Plans.LastAuto = failedPlan, failedPlan
			in.State.Failures, in.State.FailedPlan, in.State.FailedAt, in.State.BackoffUntil = 1, "a1", t0.Add(-time.Minute), t0.Add(time.Minute)
		}, kind: autoBackoff, reason: "backing off 1m (failure 1)", check: func(t *testing.T, d autoDecision) {
			if d.State.Failures != 1 {
				t.Errorf("failure counted twice: %+v", d.State)
			}
		}},
		{name: "after the backoff it cancels the failed plan", in: func(in *autoInput) {
			in.Plans.Active, in.Plans.LastAuto = failedPlan, failedPlan
			in.State.Failures, in.State.FailedPlan, in.State.FailedAt, in.State.BackoffUntil = 1, "a1", t0.Add(-6*time.Minute), t0
		}, kind: autoCancel, check: func(t *testing.T, d autoDecision) {
			if d.Cancel != "a1" {
				t.Errorf("cancel %q", d.Cancel)
			}
		}},
		{name: "backoff after the cancel", in: func(in *autoInput) {
			c := plan("a1", autoOperator, StateCancelled, t0.Add(-time.Hour), t0.Add(-time.Minute))
			in.Plans.LastAuto = c
			in.Nodes[1].State = directory.NodeDraining
			in.State.Failures, in.State.FailedPlan, in.State.FailedAt, in.State.BackoffUntil, in.State.CancelledPlan = 2, "a1", t0.Add(-6*time.Minute), t0.Add(time.Minute), "a1"
		}, kind: autoBackoff, reason: "backing off after 2 failed automatic plan(s): next try in 1m"},
		{name: "an operator's action ends the backoff", in: func(in *autoInput) {
			in.Policy.Interval = 0
			in.Nodes[1].State = directory.NodeDraining
			in.Plans.OperatorActionAt = t0.Add(-time.Second)
			in.State.Failures, in.State.FailedPlan, in.State.FailedAt, in.State.BackoffUntil = 3, "a1", t0.Add(-time.Minute), t0.Add(time.Hour)
		}, kind: autoPlan, check: func(t *testing.T, d autoDecision) {
			if d.State.Failures != 0 || !d.State.BackoffUntil.IsZero() {
				t.Errorf("backoff kept: %+v", d.State)
			}
		}},
		{name: "an operator's resume of the failed plan wins", in: func(in *autoInput) {
			r := plan("a1", autoOperator, StateApplying, t0.Add(-time.Hour), t0.Add(-time.Second))
			in.Plans.Active, in.Plans.LastAuto = r, r
			in.State.Failures, in.State.FailedPlan, in.State.FailedAt, in.State.BackoffUntil = 1, "a1", t0.Add(-time.Minute), t0.Add(time.Hour)
		}, kind: autoWaiting, reason: "plan a1 is applying"},
		{name: "a completed automatic plan resets the failures", in: func(in *autoInput) {
			in.Plans.LastAuto = plan("a2", autoOperator, StateDone, t0.Add(-time.Hour), t0.Add(-time.Minute))
			in.State.Failures, in.State.FailedPlan, in.State.FailedAt, in.State.LastPlan = 2, "a1", t0.Add(-2*time.Hour), "a2"
		}, kind: autoWatching, check: func(t *testing.T, d autoDecision) {
			if d.State.Failures != 0 {
				t.Errorf("failures %d, want 0", d.State.Failures)
			}
		}},
		{name: "a failed (final) automatic plan backs off", in: func(in *autoInput) {
			f := plan("a3", autoOperator, StateFailed, t0.Add(-time.Hour), t0.Add(-time.Minute))
			in.Plans.LastAuto = f
		}, kind: autoBackoff, reason: "automatic plan a3 failed: unknown"},
		{name: "NaN ratios are ignored", in: func(in *autoInput) {
			in.Ratios = []autoRatio{{"n1", "ops", nanRatio()}}
		}, kind: autoWatching, reason: "balanced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := autoInput{Now: t0, Policy: onPolicy(), Nodes: nodes3()}
			if tc.in != nil {
				tc.in(&in)
			}
			before := in.State.Recent
			d := decide(in)
			if d.Kind != tc.kind || !strings.Contains(d.Reason, tc.reason) {
				t.Fatalf("decision %s %q; want %s containing %q", d.Kind, d.Reason, tc.kind, tc.reason)
			}
			if tc.check != nil {
				tc.check(t, d)
			}
			if d2 := decide(in); d2.Kind != d.Kind || d2.Reason != d.Reason {
				t.Fatalf("not deterministic: %q then %q", d.Reason, d2.Reason)
			}
			if len(before) > 0 && len(in.State.Recent) != len(before) {
				t.Fatal("decide changed its input")
			}
		})
	}
}

func nanRatio() float64 { var z float64; return z / z }

// TestDecideOverTime steps a fake clock through a window, a plan, the
// interval and a freeze, feeding each decision's memory into the next.
func TestDecideOverTime(t *testing.T) {
	pol := onPolicy()
	pol.Window, pol.Interval = 6*time.Second, 4*time.Second
	in := autoInput{Now: t0, Policy: pol, Nodes: nodes3(), Ratios: hot()}
	step := func(d time.Duration) autoDecision {
		in.Now = in.Now.Add(d)
		dec := decide(in)
		in.ImbalancedSince, in.State = dec.ImbalancedSince, dec.State
		return dec
	}
	var kinds []string
	plannedAt := time.Time{}
	for range 20 {
		d := step(time.Second)
		kinds = append(kinds, string(d.Kind))
		if d.Kind == autoPlan {
			if plannedAt.IsZero() {
				plannedAt = in.Now
			}
			// The room applies the plan and records it; the plan then applies
			// for 2 s and is done; the imbalance stays.
			in.State.LastPlan, in.State.LastPlanAt = "a1", in.Now
			in.Plans.Active = plan("a1", autoOperator, StateApplying, in.Now, in.Now)
			in.Plans.LastAuto = in.Plans.Active
			step(time.Second)
			step(time.Second)
			in.Plans.Active = nil
			in.Plans.LastAuto = plan("a1", autoOperator, StateDone, in.Plans.LastAuto.Created, in.Now)
			break
		}
	}
	// First seen at +1s, so the 6 s window ends at +7s.
	if plannedAt.Sub(t0) != 7*time.Second {
		t.Fatalf("planned at +%v (kinds %v), want +7s: once the imbalance first seen at +1s lasted the 6 s window", plannedAt.Sub(t0), kinds)
	}
	// After the plan: the interval (4 s from the plan) and a new window of
	// 6 s from the first tick that saw no plan (+10s).
	var next time.Time
	for range 20 {
		if d := step(time.Second); d.Kind == autoPlan {
			next = in.Now
			break
		}
	}
	if want := plannedAt.Add(3 * time.Second).Add(6 * time.Second); !next.Equal(want) {
		t.Fatalf("second plan at +%v, want +%v (a whole window after the first plan ended)", next.Sub(t0), want.Sub(t0))
	}
	in.State.LastPlanAt = next
	// Frozen: nothing, however long the imbalance lasts.
	in.Policy.Frozen = true
	for range 30 {
		if d := step(time.Second); d.Kind != autoFrozen {
			t.Fatalf("frozen, decided %s %q", d.Kind, d.Reason)
		}
	}
	in.Policy.Frozen = false
	if d := step(time.Second); d.Kind != autoWatching || !strings.Contains(d.Reason, "for 0s of 6s") {
		t.Fatalf("unfrozen: %s %q; want the window to start over", d.Kind, d.Reason)
	}
}

func TestViewPlans(t *testing.T) {
	st := directory.AutoState{CancelledPlan: "a2"}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	failed := plan("a3", autoOperator, StatePaused, at(5), at(9))
	failed.Error = "boom"
	for _, tc := range []struct {
		name     string
		plans    []*Plan
		active   string
		lastAuto string
		opAt     time.Time
	}{
		{name: "none"},
		{name: "an operator's preview is no action", plans: []*Plan{plan("p1", "alice", StateProposed, at(1), at(1))}},
		{name: "an operator's applied plan", plans: []*Plan{plan("p1", "alice", StateApplying, at(1), at(2))}, active: "p1", opAt: at(2)},
		{name: "an operator's finished plan", plans: []*Plan{plan("p1", "alice", StateDone, at(1), at(5))}, opAt: at(5)},
		{name: "the balancer's own plans", plans: []*Plan{
			plan("a1", autoOperator, StateDone, at(1), at(2)),
			plan("a2", autoOperator, StateCancelled, at(3), at(4)),
			failed,
		}, active: "a3", lastAuto: "a3"},
		{name: "an operator paused an automatic plan", plans: []*Plan{plan("a1", autoOperator, StatePaused, at(1), at(7))}, active: "a1", lastAuto: "a1", opAt: at(7)},
		{name: "an operator cancelled an automatic plan", plans: []*Plan{plan("a1", autoOperator, StateCancelled, at(1), at(8))}, lastAuto: "a1", opAt: at(8)},
		{name: "an operator rolled an automatic plan back", plans: []*Plan{
			plan("a1", autoOperator, StateRolledBack, at(1), at(8)),
			plan("r1", "alice", StateDone, at(8), at(9)),
		}, lastAuto: "a1", opAt: at(9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := viewPlans(tc.plans, st)
			id := func(p *Plan) string {
				if p == nil {
					return ""
				}
				return p.ID
			}
			if id(v.Active) != tc.active || id(v.LastAuto) != tc.lastAuto || !v.OperatorActionAt.Equal(tc.opAt) {
				t.Fatalf("active %q last auto %q operator at %v; want %q %q %v", id(v.Active), id(v.LastAuto), v.OperatorActionAt, tc.active, tc.lastAuto, tc.opAt)
			}
		})
	}
}
