package e2e

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/e2e/harness"
	"github.com/slotd/slotd/e2e/workload"
	"github.com/slotd/slotd/slots"
)

// keysFor returns one key per slot, named prefix:n, so the workload hits
// exactly the slots a plan moves.
func keysFor(prefix string, want []uint32) []string {
	todo := map[uint32]bool{}
	for _, s := range want {
		todo[s] = true
	}
	var out []string
	for n := 0; len(todo) > 0; n++ {
		k := fmt.Sprintf("%s:%d", prefix, n)
		if s := uint32(slots.ForString(k).Int()); todo[s] {
			delete(todo, s)
			out = append(out, k)
		}
	}
	return out
}

// spread picks n slots of a plan's moves, evenly over its order.
func spread(p *slotdv1.Plan, n int) []uint32 {
	ms := p.GetMoves()
	var out []uint32
	for i := 0; i < n && len(ms) > 0; i++ {
		out = append(out, ms[i*len(ms)/n].GetSlot())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestRebalanceAddNode (scenario 1): a fourth node joins and a plan fills it
// while clients read and write keys of the slots being moved.
func TestRebalanceAddNode(t *testing.T) {
	c := newCluster(t, clusterOpts{})
	c.startNode("n4")
	c.waitRegistered("n4")
	p := c.plan(&slotdv1.PlanRequest{MaxMoves: maxMoves(), Reason: "e2e: fill n4"})
	if len(p.GetMoves()) == 0 {
		t.Fatal("the plan for a new node moves nothing")
	}
	for _, m := range p.GetMoves() {
		if m.GetTo() != "n4" {
			t.Fatalf("move %v does not fill n4", m)
		}
	}
	s := begin(c, "1 rebalance 3->4", []loaded{{"s1", 2000, 100}},
		workload.Config{KeySet: keysFor("wl1", spread(p, 16)), Clients: 4})
	c.apply(p.GetId())
	c.waitPlan(p.GetId(), 3*time.Minute)
	s.finish()
	if n := c.status().GetNodes(); !slices.ContainsFunc(n, func(l *slotdv1.NodeLoad) bool {
		return l.GetNode().GetId() == "n4" && int(l.GetSlots()) == len(p.GetMoves())
	}) {
		t.Errorf("n4 does not own the %d slots of the plan: %v", len(p.GetMoves()), n)
	}
}

// maxMoves bounds the rebalance plans: all of them with E2E_FULL, a sample
// in the short run.
func maxMoves() uint32 {
	if os.Getenv("E2E_FULL") != "" {
		return 0
	}
	return 256
}

// bigSlot loads a slot with enough data for a throttled copy to take a few
// seconds, and returns the slot and its loaded key set.
func bigSlot(tag string) (uint32, loaded) {
	return uint32(slots.ForString("{" + tag + "}").Int()), loaded{"{" + tag + "}", 1500, 1000}
}

// faultMove is the shape of scenarios 3 to 6: the big slot is moved under
// a slow throttle while the workload hits it, and fault runs once the move
// reaches one of phases.
func faultMove(t *testing.T, name string, o clusterOpts, errorsOK bool, phases []slotdv1.MovePhase,
	fault func(c *cluster, m *slotdv1.PlannedMove)) {
	c := newCluster(t, o)
	slot, big := bigSlot("big")
	owner := c.sdk.Map().RouteSlot(slots.MustNew(int(slot))).Owner()
	to := "n1"
	if owner == "n1" {
		to = "n2"
	}
	// Eight keys in the moving slot, four elsewhere.
	var keys []string
	for i := range 8 {
		keys = append(keys, fmt.Sprintf("{big}:wl:%d", i))
	}
	keys = append(keys, keysFor("wl", []uint32{1, 5000, 9000, 16000})...)
	s := begin(c, name, []loaded{big, {"f", 1000, 100}}, workload.Config{KeySet: keys, Clients: 4})
	s.clientErrorsOK = errorsOK
	// 1.5 MB at 150 kB/s: about ten seconds of copying to interrupt.
	c.setThrottle(150_000)
	id := c.move(slot, to)
	m := c.waitPhase(id, 1, phases...)
	fault(c, m)
	c.setThrottle(0)
	c.waitPlan(id, 3*time.Minute)
	s.finish()
	if got := c.sdk.Map().RouteSlot(slots.MustNew(int(slot))).Owner(); got != to {
		t.Errorf("slot %d is owned by %s after its move to %s", slot, got, to)
	}
}

// TestKillMoverSlotd (scenario 3): the slotd leading the mover is SIGKILLed
// while it copies a slot; the other replica takes over and finishes (or
// aborts and retries) the move.
func TestKillMoverSlotd(t *testing.T) {
	faultMove(t, "3 SIGKILL mover slotd mid-copy", clusterOpts{slotds: 2}, false,
		[]slotdv1.MovePhase{slotdv1.MovePhase_MOVE_PHASE_COPYING},
		func(c *cluster, m *slotdv1.PlannedMove) {
			leader := c.status().GetMoverLeader()
			i := slices.IndexFunc(c.slotd, func(p *harness.Proc) bool { return p.Name == leader })
			if i < 0 {
				c.t.Fatalf("mover leader %q is none of our slotds", leader)
			}
			c.t.Logf("SIGKILL %s (mover leader) with slot %d in %s, %d bytes copied", leader, m.GetSlot(), m.GetPhase(), m.GetBytesCopied())
			c.slotd[i].Kill()
			c.h.Eventually(30*time.Second, "another slotd leads the mover", func() error {
				if l := c.status().GetMoverLeader(); l == "" || l == leader {
					return fmt.Errorf("leader %q", l)
				}
				return nil
			})
			c.slotd[i].Restart()
		})
}
