package directory

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slotd/slotd/slots"
)

func nodeState(t *testing.T, d *Directory, id string) NodeState {
	t.Helper()
	nodes, _, err := d.Nodes(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.ID == id {
			return n.State
		}
	}
	t.Fatalf("node %s not found", id)
	return ""
}

func checkLiveness(t *testing.T, d *Directory) {
	t.Helper()
	if _, err := d.CheckLiveness(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func heartbeat(t *testing.T, d *Directory, id string) {
	t.Helper()
	if err := d.Touch(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
}

// Liveness timings of the tests below: DownAfter short, HoldDown long.
const downAfter, holdDown = 2 * time.Second, time.Hour

// livenessSetup is setup with two nodes and an injected clock.
func livenessSetup(t *testing.T) (*Directory, *Snapshot, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	_, d, snap := setup(t, 2, func(c *Config) {
		c.Now = clock.Now
		c.DownAfter = downAfter
		c.HoldDown = holdDown
	})
	return d, snap, clock
}

func TestLivenessDownAndHoldDown(t *testing.T) {
	d, snap, clock := livenessSetup(t)
	ctx := testCtx(t)

	// A new node gets DownAfter (by the injected clock) for its first heartbeat.
	checkLiveness(t, d)
	if s := nodeState(t, d, "n1"); s != NodeActive {
		t.Fatalf("n1 is %s before DownAfter, want active", s)
	}
	heartbeat(t, d, "n0")
	clock.Advance(downAfter)
	heartbeat(t, d, "n0") // renew, so the real lease surely outlives the check
	checkLiveness(t, d)
	if s := nodeState(t, d, "n1"); s != NodeDown {
		t.Fatalf("n1 without heartbeats is %s, want down", s)
	}
	if s := nodeState(t, d, "n0"); s != NodeActive {
		t.Fatalf("n0 with heartbeats is %s, want active", s)
	}

	// A down node receives no slot.
	s := slots.MustNew(ownerSlot(t, snap, "n0"))
	if _, err := d.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: "n1"}); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("move to a down node: err = %v, want ErrPrecondition", err)
	}

	// n0 stops renewing: once etcd expires its lease, it goes down.
	eventually(t, 30*time.Second, func() error {
		checkLiveness(t, d)
		if s := nodeState(t, d, "n0"); s != NodeDown {
			return fmt.Errorf("n0 is %s after its lease should have expired", s)
		}
		return nil
	})

	// Back, but held down until it has heartbeated for HoldDown.
	heartbeat(t, d, "n0")
	clock.Advance(holdDown - time.Second)
	heartbeat(t, d, "n0")
	checkLiveness(t, d)
	if s := nodeState(t, d, "n0"); s != NodeDown {
		t.Fatalf("n0 is %s within its hold-down, want down", s)
	}
	clock.Advance(time.Second)
	heartbeat(t, d, "n0")
	checkLiveness(t, d)
	if s := nodeState(t, d, "n0"); s != NodeActive {
		t.Fatalf("n0 is %s after its hold-down, want active", s)
	}

	// RunLiveness applies the same rules until cancelled.
	heartbeat(t, d, "n1")
	clock.Advance(holdDown)
	heartbeat(t, d, "n1")
	heartbeat(t, d, "n0")
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.RunLiveness(rctx) }()
	eventually(t, 30*time.Second, func() error {
		if s := nodeState(t, d, "n1"); s != NodeActive {
			return fmt.Errorf("n1 is %s", s)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunLiveness returned %v after cancel, want nil", err)
	}

	hist, err := d.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range hist {
		if c.Kind == ChangeNodeDown || c.Kind == ChangeNodeUp {
			got = append(got, c.Kind+" "+c.Node)
		}
	}
	want := fmt.Sprint([]string{"node-down n1", "node-down n0", "node-up n0", "node-up n1"})
	if fmt.Sprint(got) != want {
		t.Fatalf("liveness history = %v, want %v", got, want)
	}
}

func TestDrainedNodeStaysDrainingAfterDownAndUp(t *testing.T) {
	clock := newFakeClock()
	_, d, _ := setup(t, 2, func(c *Config) {
		c.Now = clock.Now
		c.DownAfter = 2 * time.Second
		c.HoldDown = time.Minute
	})
	if _, err := d.Drain(testCtx(t), "n1", "retire", "op"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	checkLiveness(t, d)
	if s := nodeState(t, d, "n1"); s != NodeDown {
		t.Fatalf("n1 is %s, want down", s)
	}
	heartbeat(t, d, "n1")
	clock.Advance(time.Minute)
	heartbeat(t, d, "n1")
	checkLiveness(t, d)
	if s := nodeState(t, d, "n1"); s != NodeDraining {
		t.Fatalf("n1 is %s after coming back, want draining", s)
	}
}

// TestLivenessReport: what ListNodes shows of heartbeats — the last
// renewal (to the second), the start of the run, and for a down node that
// heartbeats again when its hold-down ends.
func TestLivenessReport(t *testing.T) {
	d, _, clock := livenessSetup(t)
	ctx := testCtx(t)
	liveness := func() map[string]NodeLiveness {
		t.Helper()
		l, err := d.Liveness(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(l) != 2 {
			t.Fatalf("liveness of %d nodes, want 2: %v", len(l), l)
		}
		return l
	}
	if l := liveness(); l["n0"] != (NodeLiveness{}) || l["n1"] != (NodeLiveness{}) {
		t.Fatalf("before any heartbeat: %+v", l)
	}

	start := clock.Now().UTC()
	heartbeat(t, d, "n0")
	n0 := liveness()["n0"]
	// The lease's TTL is whole seconds, so the renewal is known to a second.
	if age := start.Sub(n0.LastHeartbeat); age < 0 || age > 2*time.Second || !n0.RunSince.Equal(start) || !n0.HoldDownUntil.IsZero() {
		t.Fatalf("n0 after a heartbeat: %+v (now %v)", n0, start)
	}

	// n1 never heartbeats: down after DownAfter; then it comes back.
	clock.Advance(downAfter)
	heartbeat(t, d, "n0")
	checkLiveness(t, d)
	if s := nodeState(t, d, "n1"); s != NodeDown {
		t.Fatalf("n1 is %s, want down", s)
	}
	back := clock.Now().UTC()
	heartbeat(t, d, "n1")
	n1 := liveness()["n1"]
	if !n1.RunSince.Equal(back) || !n1.HoldDownUntil.Equal(back.Add(holdDown)) {
		t.Fatalf("n1 back after down: %+v, want run since %v and hold-down until %v", n1, back, back.Add(holdDown))
	}
}
