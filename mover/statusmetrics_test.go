package mover

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
)

// statusDir is a bootstrapped directory on a real etcd with nodes at
// addresses nobody serves: enough to plan, apply and pause, with no mover.
func statusDir(t *testing.T, ids ...string) (*directory.Directory, *Control) {
	t.Helper()
	ctx := context.Background()
	e := etcdtest.New(t)
	dir, err := directory.New(directory.Config{Client: e.Client(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.InitLayout(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dir.SetSchema(ctx, 0, directory.SchemaVersion); err != nil {
		t.Fatal(err)
	}
	var boot []directory.Node
	for i, id := range ids {
		boot = append(boot, directory.Node{ID: id, Addr: "127.0.0.1:" + string(rune('1'+i)) + "9999", Weight: 1})
	}
	if _, err := dir.Bootstrap(ctx, boot, 128, "test"); err != nil {
		t.Fatal(err)
	}
	ctl, err := NewControl(ControlConfig{Directory: dir, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return dir, ctl
}

func TestStatusCollector(t *testing.T) {
	ctx := context.Background()
	dir, ctl := statusDir(t, "n1", "n2")
	c := NewStatusCollector(dir, ctl, 5*time.Second, testLogger())
	names := []string{"slotd_node_state", "slotd_mover_plan_state", "slotd_mover_plan_moves", "slotd_mover_plan_paused_by_failure"}
	check := func(want string) {
		t.Helper()
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
			t.Error(err)
		}
	}
	const head = `
# HELP slotd_mover_plan_moves Moves of the active plan by status (all 0 when no plan is applying or paused).
# TYPE slotd_mover_plan_moves gauge
# HELP slotd_mover_plan_paused_by_failure 1 while the active plan is paused because a move failed (not by an operator).
# TYPE slotd_mover_plan_paused_by_failure gauge
# HELP slotd_mover_plan_state 1 for the state of the plan that is applying or paused (none when there is none), 0 for the others.
# TYPE slotd_mover_plan_state gauge
# HELP slotd_node_state 1 for the node's state (active, draining, down), 0 for the other states.
# TYPE slotd_node_state gauge
`
	check(head + `
slotd_mover_plan_moves{status="aborted"} 0
slotd_mover_plan_moves{status="done"} 0
slotd_mover_plan_moves{status="failed"} 0
slotd_mover_plan_moves{status="pending"} 0
slotd_mover_plan_moves{status="skipped"} 0
slotd_mover_plan_paused_by_failure 0
slotd_mover_plan_state{state="applying"} 0
slotd_mover_plan_state{state="none"} 1
slotd_mover_plan_state{state="paused"} 0
slotd_node_state{node="n1",state="active"} 1
slotd_node_state{node="n1",state="down"} 0
slotd_node_state{node="n1",state="draining"} 0
slotd_node_state{node="n2",state="active"} 1
slotd_node_state{node="n2",state="down"} 0
slotd_node_state{node="n2",state="draining"} 0
`)

	// A drain plan applied (no mover runs it: its moves stay pending).
	p, err := ctl.Propose(ctx, PlanRequest{Edits: Edits{Drain: []string{"n2"}}, MaxMoves: 3, Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Apply(ctx, p.ID, "test"); err != nil {
		t.Fatal(err)
	}
	check(head + `
slotd_mover_plan_moves{status="aborted"} 0
slotd_mover_plan_moves{status="done"} 0
slotd_mover_plan_moves{status="failed"} 0
slotd_mover_plan_moves{status="pending"} 3
slotd_mover_plan_moves{status="skipped"} 0
slotd_mover_plan_paused_by_failure 0
slotd_mover_plan_state{state="applying"} 1
slotd_mover_plan_state{state="none"} 0
slotd_mover_plan_state{state="paused"} 0
slotd_node_state{node="n1",state="active"} 1
slotd_node_state{node="n1",state="down"} 0
slotd_node_state{node="n1",state="draining"} 0
slotd_node_state{node="n2",state="active"} 0
slotd_node_state{node="n2",state="down"} 0
slotd_node_state{node="n2",state="draining"} 1
`)

	// An operator's pause is not a failure.
	if _, err := ctl.Pause(ctx, p.ID, false, "test"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(onlyPausedByFailure{c}); got != 0 {
		t.Errorf("paused by an operator: slotd_mover_plan_paused_by_failure = %v, want 0", got)
	}
}

// onlyPausedByFailure narrows a StatusCollector to one gauge for
// testutil.ToFloat64.
type onlyPausedByFailure struct{ c *StatusCollector }

func (o onlyPausedByFailure) Describe(ch chan<- *prometheus.Desc) { ch <- o.c.pausedByFailure }
func (o onlyPausedByFailure) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 64)
	go func() { o.c.Collect(all); close(all) }()
	for m := range all {
		if m.Desc() == o.c.pausedByFailure {
			ch <- m
		}
	}
}
