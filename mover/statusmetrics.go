package mover

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotd/slotd/directory"
)

// StatusCollector exports what an operator (or an alert) acts on, read
// from where it is written at each scrape rather than kept as a periodic
// copy: every node's state and the active plan's state and progress. Every
// replica exports the same values (they come from etcd), so alerts take
// the max over replicas.
//
// Metrics:
//
//	slotd_node_state{node,state}              1 for the node's state (active, draining, down), 0 for the others
//	slotd_mover_plan_state{state}             1 for the active plan's state (applying, paused) or none
//	slotd_mover_plan_moves{status}            the active plan's moves by status (pending, done, skipped, aborted)
//	slotd_mover_plan_paused_by_failure        1 while the active plan is paused by a failed move, not by an operator
//	slotd_mover_status_read_errors_total      scrapes whose read of the directory failed (the gauges above are left out then)
type StatusCollector struct {
	dir     *directory.Directory
	ctl     *Control
	timeout time.Duration
	lg      *slog.Logger

	nodeState, planState, planMoves, pausedByFailure *prometheus.Desc
	readErrors                                       prometheus.Counter
}

var _ prometheus.Collector = (*StatusCollector)(nil)

// NewStatusCollector returns a collector over dir and ctl; register it on
// the process's registry. Each scrape reads the directory once and the
// active plan once, within timeout (default 2 s).
func NewStatusCollector(dir *directory.Directory, ctl *Control, timeout time.Duration, lg *slog.Logger) *StatusCollector {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &StatusCollector{
		dir: dir, ctl: ctl, timeout: timeout, lg: lg,
		nodeState: prometheus.NewDesc("slotd_node_state",
			"1 for the node's state (active, draining, down), 0 for the other states.", []string{"node", "state"}, nil),
		planState: prometheus.NewDesc("slotd_mover_plan_state",
			"1 for the state of the plan that is applying or paused (none when there is none), 0 for the others.", []string{"state"}, nil),
		planMoves: prometheus.NewDesc("slotd_mover_plan_moves",
			"Moves of the active plan by status (all 0 when no plan is applying or paused).", []string{"status"}, nil),
		pausedByFailure: prometheus.NewDesc("slotd_mover_plan_paused_by_failure",
			"1 while the active plan is paused because a move failed (not by an operator).", nil, nil),
		readErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slotd_mover_status_read_errors_total",
			Help: "Scrapes whose directory read failed; node and plan state were left out of them.",
		}),
	}
}

// nodeStates and planStates are the label values exported, in order.
var (
	nodeStates = []directory.NodeState{directory.NodeActive, directory.NodeDraining, directory.NodeDown}
	planStates = []string{"none", string(StateApplying), string(StatePaused)}
	moveStates = []string{"pending", "done", "skipped", "aborted", "failed"}
)

// Describe implements prometheus.Collector.
func (c *StatusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.nodeState
	ch <- c.planState
	ch <- c.planMoves
	ch <- c.pausedByFailure
	c.readErrors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *StatusCollector) Collect(ch chan<- prometheus.Metric) {
	defer c.readErrors.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	snap, err := c.dir.Snapshot(ctx)
	if err != nil {
		c.readErrors.Inc()
		c.lg.Debug("status metrics: directory unreadable", "err", err)
		return
	}
	for _, n := range snap.Nodes {
		for _, st := range nodeStates {
			ch <- prometheus.MustNewConstMetric(c.nodeState, prometheus.GaugeValue, b2f(n.State == st), n.ID, string(st))
		}
	}
	p, err := c.ctl.Active(ctx)
	if err != nil {
		c.readErrors.Inc()
		c.lg.Debug("status metrics: plans unreadable", "err", err)
		return
	}
	state := "none"
	var pr Progress
	if p != nil {
		state = string(p.State)
		pr = p.Progress()
	}
	for _, st := range planStates {
		ch <- prometheus.MustNewConstMetric(c.planState, prometheus.GaugeValue, b2f(st == state), st)
	}
	counts := []int{pr.Pending, pr.Done, pr.Skipped, pr.Aborted, pr.Failed}
	for i, st := range moveStates {
		ch <- prometheus.MustNewConstMetric(c.planMoves, prometheus.GaugeValue, float64(counts[i]), st)
	}
	ch <- prometheus.MustNewConstMetric(c.pausedByFailure, prometheus.GaugeValue,
		b2f(p != nil && p.State == StatePaused && p.Error != ""))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
