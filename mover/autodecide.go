package mover

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/backoff"
)

// The automatic balancer's decisions. decide is a pure function of its
// input (the policy, what the balancer remembers, the cluster as seen now
// and the clock), so every rule below is tested on a fake clock; the room
// in balancer.go gathers the input, acts on the decision and stores what
// it must remember.

// autoOperator is the operator name of every automatic plan.
const autoOperator = "auto"

// maxAutoBackoff caps the balancer's backoff after failed plans.
const maxAutoBackoff = time.Hour

// autoKind is what the balancer decided to do.
type autoKind string

// The kinds of decisions, and the balancer states status shows.
const (
	autoOff      autoKind = "off"      // the policy is off
	autoFrozen   autoKind = "frozen"   // frozen: no new plan
	autoWaiting  autoKind = "waiting"  // a plan applies or is paused, the interval runs, or the budget is spent
	autoWatching autoKind = "watching" // balanced, or an imbalance not yet as long as the window
	autoPlan     autoKind = "planning" // propose and apply a plan
	autoBackoff  autoKind = "backoff"  // an automatic plan failed: wait before planning again
	autoCancel   autoKind = "cancel"   // the backoff ran out: cancel the failed automatic plan
)

// autoKinds lists the kinds in the order of the slotd_balancer_state gauge.
var autoKinds = []autoKind{autoOff, autoFrozen, autoWaiting, autoWatching, autoPlan, autoBackoff, autoCancel}

// autoPlanView is what decide needs to know of the stored plans; see
// viewPlans.
type autoPlanView struct {
	// Active is the plan applying or paused, or nil.
	Active *Plan
	// LastAuto is the newest automatic plan, or nil.
	LastAuto *Plan
	// OperatorActionAt is when an operator last applied, paused, resumed,
	// cancelled or rolled back a plan (zero: never, as far as the kept
	// plans tell).
	OperatorActionAt time.Time
}

// viewPlans summarizes plans for decide. An operator's action is any
// change of a plan the balancer did not make: a plan of another operator
// that left proposed, an automatic plan paused with no failure (a pause),
// or cancelled but not by the balancer, or rolled back.
func viewPlans(plans []*Plan, st directory.AutoState) autoPlanView {
	var v autoPlanView
	for _, p := range plans {
		if p.State.Active() && (v.Active == nil || p.Created.After(v.Active.Created)) {
			v.Active = p
		}
		auto := p.Operator == autoOperator
		if auto && (v.LastAuto == nil || p.Created.After(v.LastAuto.Created)) {
			v.LastAuto = p
		}
		var operator bool
		switch {
		case !auto:
			operator = p.State != StateProposed
		case p.State == StatePaused:
			operator = p.Error == ""
		case p.State == StateCancelled:
			operator = p.ID != st.CancelledPlan
		case p.State == StateRolledBack || p.RolledBackBy != "":
			operator = true
		}
		if operator && p.Updated.After(v.OperatorActionAt) {
			v.OperatorActionAt = p.Updated
		}
	}
	return v
}

// autoNode is a node as the balancer sees it.
type autoNode struct {
	ID    string
	State directory.NodeState
	Slots int
	// Reported: the node's load is known (it reported); a new node is
	// filled only once it has.
	Reported bool
}

// autoRatio is one node's load over its fair share in one dimension
// (slots, bytes, ops); 1 is balanced.
type autoRatio struct {
	Node      string
	Dimension string
	Ratio     float64
}

// autoInput is everything decide looks at.
type autoInput struct {
	Now    time.Time
	Policy directory.AutoPolicy
	// State is what the balancer stored last (it outlives leaders).
	State directory.AutoState
	// ImbalancedSince is when the current imbalance was first seen
	// (zero: none). It is kept in the leader's memory: a new leader
	// watches a whole window again before it plans.
	ImbalancedSince time.Time
	Plans           autoPlanView
	Nodes           []autoNode
	// Ratios are the measured (or, with no load known, slot count) ratios
	// of the dimensions the policy balances by.
	Ratios []autoRatio
}

// autoDecision is what the balancer does next and what it remembers.
type autoDecision struct {
	Kind autoKind
	// Reason says why, in words: for a plan it is the plan's reason
	// ("auto: n2 bytes ratio 1.62 > 1.10 for 10m").
	Reason string
	// Trigger of a plan: drain, fill or imbalance.
	Trigger string
	// MaxMoves and MaxBytes are what is left of the hourly budget (0: no
	// bound), for the planner.
	MaxMoves int
	MaxBytes int64
	// Cancel is the failed automatic plan to cancel (autoCancel).
	Cancel string
	// ImbalancedSince is the next input's.
	ImbalancedSince time.Time
	// State is what to store (unchanged unless the decision changed it).
	State directory.AutoState
}

// decide decides what the automatic balancer does now. It is pure: the same
// input gives the same decision.
func decide(in autoInput) autoDecision {
	st := in.State
	st.Recent = spendSince(st.Recent, in.Now.Add(-time.Hour))
	d := autoDecision{State: st}
	pol, now := in.Policy, in.Now

	// An operator's action after a failure ends the backoff.
	if !st.FailedAt.IsZero() && in.Plans.OperatorActionAt.After(st.FailedAt) {
		d.State.Failures, d.State.BackoffUntil, d.State.FailedAt = 0, time.Time{}, time.Time{}
	}
	// A completed automatic plan ends the failure count.
	if la := in.Plans.LastAuto; la != nil && la.State == StateDone && la.ID == st.LastPlan && d.State.Failures > 0 && la.ID != st.FailedPlan {
		d.State.Failures, d.State.BackoffUntil, d.State.FailedAt = 0, time.Time{}, time.Time{}
	}

	switch {
	case !pol.Enabled:
		return d.is(autoOff, "the balancer is off (slotctl auto on)")
	case pol.Frozen:
		reason := "frozen: no new automatic plan (slotctl auto unfreeze)"
		if pol.Reason != "" {
			reason += ": " + pol.Reason
		}
		return d.is(autoFrozen, reason)
	}

	// A failed automatic plan: back off, then cancel it.
	if failed := failedAuto(in.Plans); failed != nil {
		if d.State.FailedPlan != failed.ID {
			d.failed(failed, pol, now)
		}
		if now.Before(d.State.BackoffUntil) {
			return d.is(autoBackoff, fmt.Sprintf("automatic plan %s %s: %s; backing off %s (failure %d)",
				failed.ID, failed.State, orUnknown(failed.Error), roundDur(d.State.BackoffUntil.Sub(now)), d.State.Failures))
		}
		if failed.State == StatePaused {
			d.Cancel = failed.ID
			return d.is(autoCancel, fmt.Sprintf("cancel automatic plan %s, paused by failure %d backoffs ago", failed.ID, d.State.Failures))
		}
	}
	if a := in.Plans.Active; a != nil {
		return d.is(autoWaiting, fmt.Sprintf("plan %s is %s (by %s)", a.ID, a.State, orUnknown(a.Operator)))
	}
	if now.Before(d.State.BackoffUntil) {
		return d.is(autoBackoff, fmt.Sprintf("backing off after %d failed automatic plan(s): next try in %s", d.State.Failures, roundDur(d.State.BackoffUntil.Sub(now))))
	}

	// What would trigger a plan. The window is watched during the
	// interval, so an imbalance that lasted both plans as soon as both end.
	trigger, reason := nodeTrigger(in.Nodes)
	worst, outside := worstRatio(in.Ratios, pol.Tolerance)
	if outside {
		d.ImbalancedSince = in.ImbalancedSince
		if d.ImbalancedSince.IsZero() || d.ImbalancedSince.After(now) {
			d.ImbalancedSince = now
		}
	}

	since := latest(d.State.LastPlanAt, in.Plans.OperatorActionAt)
	if next := since.Add(pol.Interval); !since.IsZero() && now.Before(next) {
		what := "an automatic plan"
		if in.Plans.OperatorActionAt.After(d.State.LastPlanAt) {
			what = "an operator's action"
		}
		return d.is(autoWaiting, fmt.Sprintf("%s at %s: the interval (%s) runs %s more", what, since.UTC().Format(time.TimeOnly), roundDur(pol.Interval), roundDur(next.Sub(now))))
	}

	if trigger == "" {
		if !outside {
			return d.is(autoWatching, fmt.Sprintf("balanced within %s", pct(pol.Tolerance)))
		}
		lasted := now.Sub(d.ImbalancedSince)
		if lasted < pol.Window {
			return d.is(autoWatching, fmt.Sprintf("%s for %s of %s", ratioText(worst, pol.Tolerance), roundDur(lasted), roundDur(pol.Window)))
		}
		trigger, reason = "imbalance", fmt.Sprintf("%s for %s", ratioText(worst, pol.Tolerance), roundDur(pol.Window))
	}

	// The hourly budget.
	var moves int
	var bytes int64
	for _, r := range d.State.Recent {
		moves += r.Moves
		bytes += r.Bytes
	}
	if (pol.BudgetMoves > 0 && moves >= pol.BudgetMoves) || (pol.BudgetBytes > 0 && bytes >= pol.BudgetBytes) {
		return d.is(autoWaiting, fmt.Sprintf("hourly budget spent (%d of %d moves, %d of %d bytes): %s waits until %s",
			moves, pol.BudgetMoves, bytes, pol.BudgetBytes, trigger, d.State.Recent[0].At.Add(time.Hour).UTC().Format(time.TimeOnly)))
	}
	if pol.BudgetMoves > 0 {
		d.MaxMoves = pol.BudgetMoves - moves
	}
	if pol.BudgetBytes > 0 {
		d.MaxBytes = pol.BudgetBytes - bytes
	}
	d.Trigger = trigger
	return d.is(autoPlan, "auto: "+reason)
}

func (d autoDecision) is(k autoKind, reason string) autoDecision {
	d.Kind, d.Reason = k, reason
	if k != autoWatching && k != autoWaiting {
		// Off, frozen, backing off or planning: the next imbalance is
		// watched from its start.
		d.ImbalancedSince = time.Time{}
	}
	return d
}

// failed records the failure of automatic plan p and sets the backoff:
// the interval (at least 30 s) doubling with each failure in a row, up to
// maxAutoBackoff.
func (d *autoDecision) failed(p *Plan, pol directory.AutoPolicy, now time.Time) {
	d.State.Failures++
	d.State.FailedPlan, d.State.FailedAt = p.ID, now
	b := backoff.Backoff{Initial: max(pol.Interval, 30*time.Second), Max: maxAutoBackoff}
	d.State.BackoffUntil = now.Add(b.Cap(d.State.Failures - 1))
}

// failedAuto returns the newest automatic plan if it is paused by a
// failure or failed.
func failedAuto(v autoPlanView) *Plan {
	p := v.LastAuto
	if p == nil || !(p.State == StatePaused && p.Error != "" || p.State == StateFailed) {
		return nil
	}
	return p
}

// nodeTrigger returns the first node change that needs a plan: a draining
// node that still owns slots (empty it), else an active node that owns
// none and has reported (fill it).
func nodeTrigger(nodes []autoNode) (trigger, reason string) {
	ns := slices.SortedFunc(slices.Values(nodes), func(a, b autoNode) int { return strings.Compare(a.ID, b.ID) })
	for _, n := range ns {
		if n.State == directory.NodeDraining && n.Slots > 0 {
			return "drain", fmt.Sprintf("%s draining, %d slots to move", n.ID, n.Slots)
		}
	}
	var empty []string
	for _, n := range ns {
		if n.State == directory.NodeActive && n.Slots == 0 && n.Reported {
			empty = append(empty, n.ID)
		}
	}
	if len(empty) > 0 && len(empty) < len(ns) {
		return "fill", fmt.Sprintf("fill new node %s", strings.Join(empty, ", "))
	}
	return "", ""
}

// worstRatio returns the ratio farthest outside 1 ± tol (ties: by node,
// then dimension) and whether any is outside.
func worstRatio(rs []autoRatio, tol float64) (autoRatio, bool) {
	var worst autoRatio
	found := false
	for _, r := range rs {
		if math.IsNaN(r.Ratio) || math.Abs(r.Ratio-1) <= tol {
			continue
		}
		if !found || cmp.Or(cmp.Compare(math.Abs(worst.Ratio-1), math.Abs(r.Ratio-1)),
			strings.Compare(r.Node, worst.Node), strings.Compare(r.Dimension, worst.Dimension)) < 0 {
			worst, found = r, true
		}
	}
	return worst, found
}

func ratioText(r autoRatio, tol float64) string {
	if r.Ratio > 1 {
		return fmt.Sprintf("%s %s ratio %.2f > %.2f", r.Node, r.Dimension, r.Ratio, 1+tol)
	}
	return fmt.Sprintf("%s %s ratio %.2f < %.2f", r.Node, r.Dimension, r.Ratio, 1-tol)
}

// spendSince keeps the spends at or after t.
func spendSince(rs []directory.AutoPlanSpend, t time.Time) []directory.AutoPlanSpend {
	var out []directory.AutoPlanSpend
	for _, r := range rs {
		if !r.At.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func pct(f float64) string { return fmt.Sprintf("%g%%", math.Round(f*1000)/10) }

// roundDur prints a duration rounded for people: 10m, 6s, 1m30s.
func roundDur(d time.Duration) string {
	switch {
	case d >= time.Minute:
		d = d.Round(time.Second)
	case d >= time.Second:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Millisecond)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
