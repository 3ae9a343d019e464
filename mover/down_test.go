package mover

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/waitfor"
)

// markDown makes the liveness check find id down: the other nodes
// heartbeat, and a directory whose clock runs an hour ahead checks.
func (c *cluster) markDown(id string) {
	c.t.Helper()
	late, err := directory.New(directory.Config{Client: c.etcd.Client(), Logger: testLogger(),
		Now: func() time.Time { return time.Now().Add(time.Hour) }, DownAfter: time.Minute, HoldDown: time.Hour})
	if err != nil {
		c.t.Fatal(err)
	}
	snap, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, n := range snap.Nodes {
		if n.ID != id {
			if err := late.Touch(c.ctx, n.ID); err != nil {
				c.t.Fatal(err)
			}
		}
	}
	if _, err := late.CheckLiveness(c.ctx); err != nil {
		c.t.Fatal(err)
	}
	waitfor.Err(c.t, 10*time.Second, id+" down", func() error {
		snap, err := c.dir.Snapshot(c.ctx)
		if err != nil {
			return err
		}
		if n, ok := snap.Node(id); !ok || n.State != directory.NodeDown {
			return errors.New("not down yet")
		}
		return nil
	})
}

// TestDownNodeNeverGives: no plan moves a slot out of a down node, even
// one asked to drain (it stays down), the plan lists its slots as
// blocked, and applying a plan made while the node was up is
// refused once it is down. On the old code the drain planned every slot of
// the down node.
func TestDownNodeNeverGives(t *testing.T) {
	c := newCluster(t, 3)
	before, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Weights: map[string]int{"n1": 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(movesFrom(before, "n3"), "n3") {
		t.Fatalf("n3 up: expected moves out of n3, got %s", movesFrom(before, "n3"))
	}
	c.markDown("n3")

	for _, e := range []Edits{{Drain: []string{"n3"}}, {Weights: map[string]int{"n3": 0}}, {Weights: map[string]int{"n1": 2}}} {
		p, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: e})
		if err != nil {
			t.Fatalf("edits %+v: %v", e, err)
		}
		if m := movesFrom(p, "n3"); m != "" {
			t.Fatalf("edits %+v: moves out of down n3: %s", e, m)
		}
		if len(p.Blocked) != 1 || p.Blocked[0].Node != "n3" || p.Blocked[0].Count == 0 {
			t.Fatalf("edits %+v: blocked = %+v", e, p.Blocked)
		}
	}
	_, err = c.ctl.Apply(c.ctx, before.ID, "test")
	if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "down") {
		t.Fatalf("apply with its source down: %v", err)
	}
}

func movesFrom(p *Plan, id string) string {
	var b strings.Builder
	for _, m := range p.Moves {
		if m.From == id {
			b.WriteString(" " + m.From + "->" + m.To)
			if b.Len() > 60 {
				break
			}
		}
	}
	return b.String()
}
