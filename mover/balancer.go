package mover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover/planner"
)

// The balancer room: the automatic balancer as a part of the mover's
// leader. Each tick it reads the policy, its stored state, the plans and
// the table, asks decide what to do, and does it through the operator's
// own path (Control.Propose and Apply as operator "auto"), so each of its
// plans is an ordinary plan: in history, pausable, cancellable, reversible.
// It runs only while its slotd leads the mover (the leader runs it with the
// leader's context), so two balancers never plan at once.

// DefaultBalancerTick is how often the balancer decides.
const DefaultBalancerTick = 5 * time.Second

// BalancerConfig configures a Balancer.
type BalancerConfig struct {
	Directory *directory.Directory // required
	Control   *Control             // required
	// Name is this slotd's name, recorded in the state status shows.
	Name string
	// Load is the nodes' measured load; nil balances by slot counts (and
	// a policy asking for bytes or ops falls back to them, saying so).
	Load LoadSource
	// Tick is how often it decides; default DefaultBalancerTick.
	Tick time.Duration
	// Now is the clock; default time.Now.
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Balancer is the automatic balancer. Run it on the mover's leader only;
// tick is one decision (the tests call it). Safe for use by one goroutine
// at a time.
type Balancer struct {
	cfg BalancerConfig
	lg  *slog.Logger
	m   *balancerMetrics

	// Memory of the leader's term: the imbalance's start (a new leader
	// watches a whole window again) and when the state was last written.
	imbalancedSince time.Time
	lastWrite       time.Time
}

// NewBalancer returns a balancer; it does nothing until Run.
func NewBalancer(cfg BalancerConfig) (*Balancer, error) {
	if cfg.Directory == nil || cfg.Control == nil {
		return nil, fmt.Errorf("%w: the balancer needs a directory and a control", ErrInvalid)
	}
	if cfg.Tick < 0 {
		return nil, fmt.Errorf("%w: balancer tick %v is negative", ErrInvalid, cfg.Tick)
	}
	if cfg.Tick == 0 {
		cfg.Tick = DefaultBalancerTick
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newBalancerMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Balancer{cfg: cfg, lg: cfg.Logger.With("part", "balancer"), m: m}, nil
}

// Run decides every tick until ctx ends (the leader's term), then returns
// ctx's error. A tick that fails is logged and retried at the next one.
func (b *Balancer) Run(ctx context.Context) error {
	b.imbalancedSince = time.Time{}
	defer b.m.stopped()
	t := time.NewTicker(b.cfg.Tick)
	defer t.Stop()
	for {
		if _, err := b.tick(ctx); err != nil && ctx.Err() == nil {
			b.lg.Warn("balancer tick failed; trying again at the next", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// tick makes one decision and acts on it.
func (b *Balancer) tick(ctx context.Context) (autoDecision, error) {
	now := b.cfg.Now().UTC()
	pol, err := b.cfg.Directory.AutoPolicy(ctx)
	if err != nil {
		return autoDecision{}, err
	}
	b.m.policy(pol)
	st, rev, err := b.cfg.Directory.AutoState(ctx)
	if err != nil {
		return autoDecision{}, err
	}
	in := autoInput{Now: now, Policy: pol, State: st, ImbalancedSince: b.imbalancedSince}
	// Off or frozen needs nothing else read.
	if pol.Enabled && !pol.Frozen {
		plans, err := b.cfg.Control.List(ctx)
		if err != nil {
			return autoDecision{}, err
		}
		in.Plans = viewPlans(plans, st)
		snap, err := b.cfg.Directory.Snapshot(ctx)
		if err != nil {
			return autoDecision{}, err
		}
		in.Nodes, in.Ratios = b.view(snap, pol.BalanceBy, now)
	}
	d := decide(in)
	b.imbalancedSince = d.ImbalancedSince

	switch d.Kind {
	case autoPlan:
		// An imbalance the planner finds nothing to move for stays watched
		// from its start: the next try, after the interval, is not a whole
		// window later.
		since := in.ImbalancedSince
		if since.IsZero() {
			since = now
		}
		if err := b.plan(ctx, &d, pol, now); err != nil {
			// Not a failure of a plan (none was applied): tried again at the
			// next tick, or the operator came first.
			b.lg.Warn("automatic plan not applied", "reason", d.Reason, "err", err)
			d.Reason = fmt.Sprintf("%s: not applied: %v", d.Reason, err)
		}
		if d.Kind == autoWatching && d.Trigger == "imbalance" {
			b.imbalancedSince = since
		}
	case autoCancel:
		actx := directory.WithAudit(ctx, directory.AuditEntry{Kind: directory.AuditPlan, Action: directory.ActionCancel, PlanID: d.Cancel, By: autoOperator, Reason: d.Reason})
		if _, err := b.cfg.Control.Cancel(actx, d.Cancel, autoOperator); err != nil && !errors.Is(err, ErrPrecondition) {
			return d, fmt.Errorf("cancel failed automatic plan %s: %w", d.Cancel, err)
		}
		d.State.CancelledPlan = d.Cancel
		// What it spent is what it moved, not what it planned.
		if p, err := b.cfg.Control.Get(ctx, d.Cancel); err == nil {
			pr := p.Progress()
			for i, r := range d.State.Recent {
				if r.Plan == d.Cancel {
					d.State.Recent[i].Moves, d.State.Recent[i].Bytes = pr.Done, pr.BytesDone
				}
			}
		}
		b.lg.Warn("automatic plan cancelled after its backoff", "plan", d.Cancel, "failures", d.State.Failures)
	}
	if d.Kind == autoBackoff && d.State.FailedPlan != st.FailedPlan {
		b.lg.Warn("automatic plan failed; backing off", "plan", d.State.FailedPlan, "failures", d.State.Failures, "until", d.State.BackoffUntil)
	}
	b.m.decided(d, now)
	return d, b.store(ctx, rev, st, d, now)
}

// view returns the nodes and the ratios decide looks at: measured ratios
// of the policy's dimensions when the load is known, else slot counts over
// each active node's weighted share.
func (b *Balancer) view(snap *directory.Snapshot, by string, now time.Time) ([]autoNode, []autoRatio) {
	counts := snap.Counts()
	var dims []string
	switch by {
	case "bytes", "ops":
		dims = []string{by}
	case "auto":
		dims = []string{"bytes", "ops"}
	}
	var ratios []autoRatio
	reported := map[string]bool{}
	if b.cfg.Load != nil && len(dims) > 0 {
		loads := b.cfg.Load.NodeLoads(now)
		for id := range loads {
			reported[id] = true
		}
		for _, dim := range dims {
			ratios = append(ratios, loadRatios(snap.Nodes, loads, dim)...)
		}
	}
	nodes := make([]autoNode, 0, len(snap.Nodes))
	for _, n := range snap.Nodes {
		// With no measured load at all, an active node counts as reported:
		// it registered and heartbeats.
		rep := reported[n.ID] || b.cfg.Load == nil
		nodes = append(nodes, autoNode{ID: n.ID, State: n.State, Slots: counts[n.ID], Reported: rep})
	}
	if len(ratios) == 0 {
		ratios = slotRatios(snap, counts)
	}
	return nodes, ratios
}

// loadRatios returns the measured ratio in dimension dim ("bytes" or
// "ops") of every active node of nodes whose load is known (in loads): its
// load over its fair share, which is its weight over the weight of the
// active nodes of known load, times the load of every node of known load
// (a draining node's load must go somewhere). 1 is balanced for any
// weights; when the known nodes hold none of dim at all, every active one
// is balanced.
func loadRatios(nodes []directory.Node, loads map[string]planner.NodeLoad, dim string) []autoRatio {
	if dim != "bytes" && dim != "ops" {
		return nil
	}
	active := map[string]int{} // weight of each active node
	for _, n := range nodes {
		if n.State == directory.NodeActive {
			active[n.ID] = n.Weight
		}
	}
	ids := slices.Sorted(maps.Keys(loads))
	value := make(map[string]float64, len(ids))
	var total, weight float64
	for _, id := range ids {
		var bytes, reads, writes float64
		for _, s := range loads[id].Slots {
			bytes += s.Bytes
			reads += s.Reads
			writes += s.Writes
		}
		v := bytes
		if dim == "ops" {
			v = reads + writes
		}
		value[id] = v
		total += v
		weight += float64(active[id])
	}
	var out []autoRatio
	for _, id := range ids {
		w := active[id]
		if w <= 0 {
			continue // not active, or no share
		}
		r := 1.0 // nothing to balance: every share is zero
		if fair := float64(w) / weight * total; fair > 0 {
			r = value[id] / fair
		}
		out = append(out, autoRatio{Node: id, Dimension: dim, Ratio: r})
	}
	return out
}

// slotRatios are the active nodes' slot counts over their weighted share.
func slotRatios(snap *directory.Snapshot, counts map[string]int) []autoRatio {
	total := 0
	for _, n := range snap.Nodes {
		if n.State == directory.NodeActive {
			total += n.Weight
		}
	}
	var out []autoRatio
	if total == 0 {
		return nil
	}
	for _, n := range snap.Nodes {
		if n.State != directory.NodeActive || n.Weight <= 0 {
			continue
		}
		share := 16384 * float64(n.Weight) / float64(total)
		out = append(out, autoRatio{Node: n.ID, Dimension: "slots", Ratio: float64(counts[n.ID]) / share})
	}
	return out
}

// plan proposes and applies a plan for d as operator "auto" and records it
// in d.State. An empty plan is left proposed and counts as a plan for the
// interval, so that an imbalance the planner cannot fix (a hot slot) is
// not planned again every tick. When the stores' figures of now show no
// imbalance at all (the reports the decision read were older), no plan is
// stored, and the interval counts from now too.
func (b *Balancer) plan(ctx context.Context, d *autoDecision, pol directory.AutoPolicy, now time.Time) error {
	p, err := b.cfg.Control.Propose(ctx, autoPlanRequest(*d, pol))
	if errors.Is(err, ErrBalanced) {
		// The reports showed an imbalance for a window, the stores' answers
		// of now show none: no plan. The interval still counts from now,
		// so the stores are not asked again every tick.
		d.State.LastPlanAt = now
		d.Kind, d.Reason = autoWatching, d.Reason+": the stores' figures of now are balanced, no plan"
		return nil
	}
	if err != nil {
		return err
	}
	d.State.LastPlan, d.State.LastPlanAt = p.ID, now
	if len(p.Moves) == 0 {
		d.Kind, d.Reason = autoWatching, d.Reason+": the planner found nothing to move"
		return nil
	}
	actx := directory.WithAudit(ctx, directory.AuditEntry{Kind: directory.AuditPlan, Action: directory.ActionApply, PlanID: p.ID, By: autoOperator, Reason: d.Reason})
	if _, err := b.cfg.Control.Apply(actx, p.ID, autoOperator); err != nil {
		d.State.LastPlanAt = time.Time{}
		return err
	}
	d.State.Recent = append(d.State.Recent, directory.AutoPlanSpend{Plan: p.ID, At: now, Moves: len(p.Moves), Bytes: p.TotalBytes})
	b.m.plans.WithLabelValues(d.Trigger).Inc()
	b.lg.Info("automatic plan applied", "plan", p.ID, "moves", len(p.Moves), "bytes", p.TotalBytes, "reason", d.Reason)
	return nil
}

// autoPlanRequest is the plan request for an automatic plan: the budget
// left as its bound, the policy's balance mode and band, the decision's
// reason.
func autoPlanRequest(d autoDecision, pol directory.AutoPolicy) PlanRequest {
	return PlanRequest{MaxMoves: d.MaxMoves, MaxBytes: d.MaxBytes, Operator: autoOperator, Reason: d.Reason,
		BalanceBy: planner.BalanceBy(pol.BalanceBy), Tolerance: pol.Tolerance, SkipIfBalanced: true}
}

// stateWriteEvery bounds how often a decision whose words alone changed
// ("for 4m of 10m") is written.
const stateWriteEvery = 30 * time.Second

// store writes the balancer's state when it changed: the decision's kind,
// its memory (backoff, plans, spend), or its words after stateWriteEvery.
func (b *Balancer) store(ctx context.Context, rev int64, old directory.AutoState, d autoDecision, now time.Time) error {
	st := d.State
	st.Leader = b.cfg.Name
	st.Decision, st.DecisionKind = d.Reason, string(d.Kind)
	st.DecidedAt = old.DecidedAt
	if old.DecisionKind != st.DecisionKind || st.DecidedAt.IsZero() {
		st.DecidedAt = now
	}
	memory := st.Failures != old.Failures || !st.BackoffUntil.Equal(old.BackoffUntil) || st.FailedPlan != old.FailedPlan ||
		st.CancelledPlan != old.CancelledPlan || st.LastPlan != old.LastPlan || !st.LastPlanAt.Equal(old.LastPlanAt) ||
		len(st.Recent) != len(old.Recent) || st.Leader != old.Leader
	words := st.Decision != old.Decision && now.Sub(b.lastWrite) >= stateWriteEvery
	if !memory && old.DecisionKind == st.DecisionKind && !words {
		return nil
	}
	if err := b.cfg.Directory.PutAutoState(ctx, rev, st); err != nil {
		return fmt.Errorf("store balancer state: %w", err)
	}
	b.lastWrite = now
	return nil
}

// balancerMetrics are the balancer's gauges and counters.
type balancerMetrics struct {
	enabled, frozen, backoff, failures, lastDecision prometheus.Gauge
	state                                            *prometheus.GaugeVec
	plans                                            *prometheus.CounterVec
}

func newBalancerMetrics(reg prometheus.Registerer) (*balancerMetrics, error) {
	m := &balancerMetrics{
		enabled: prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotd_balancer_enabled",
			Help: "1 when the automatic balancer's policy is on (as its leader last read it)."}),
		frozen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotd_balancer_frozen",
			Help: "1 when the automatic balancer is frozen (slotctl auto freeze)."}),
		backoff: prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotd_balancer_backoff_seconds",
			Help: "Seconds until the balancer plans again after a failed automatic plan (0: no backoff)."}),
		failures: prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotd_balancer_failures",
			Help: "Automatic plans in a row that failed; 0 again after one completes or an operator acts."}),
		lastDecision: prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotd_balancer_last_decision_timestamp_seconds",
			Help: "Unix time of the balancer's last decision (it decides every --balancer-tick on the mover's leader)."}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotd_balancer_state",
			Help: "1 for the balancer's current state (its last decision's kind), 0 for the others; all 0 off the leader."}, []string{"state"}),
		plans: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slotd_balancer_plans_total",
			Help: "Automatic plans applied, by trigger (drain, fill, imbalance)."}, []string{"trigger"}),
	}
	for _, k := range autoKinds {
		m.state.WithLabelValues(string(k))
	}
	for _, t := range []string{"drain", "fill", "imbalance"} {
		m.plans.WithLabelValues(t)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.enabled, m.frozen, m.backoff, m.failures, m.lastDecision, m.state, m.plans} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("mover: register balancer metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *balancerMetrics) policy(p directory.AutoPolicy) {
	m.enabled.Set(b2f(p.Enabled))
	m.frozen.Set(b2f(p.Frozen))
}

func (m *balancerMetrics) decided(d autoDecision, now time.Time) {
	for _, k := range autoKinds {
		m.state.WithLabelValues(string(k)).Set(b2f(k == d.Kind))
	}
	m.failures.Set(float64(d.State.Failures))
	m.backoff.Set(max(0, d.State.BackoffUntil.Sub(now).Seconds()))
	m.lastDecision.Set(float64(now.UnixNano()) / 1e9)
}

// stopped clears the gauges that only the leader's balancer sets.
func (m *balancerMetrics) stopped() {
	for _, k := range autoKinds {
		m.state.WithLabelValues(string(k)).Set(0)
	}
	m.backoff.Set(0)
}
