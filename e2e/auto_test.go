package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slotkv/workload"
)

// setAuto changes the automatic balancer's policy through slotd.
func (c *cluster) setAuto(req *slotdv1.SetAutoPolicyRequest) *slotdv1.AutoStatusResponse {
	c.t.Helper()
	req.Operator = "e2e"
	r, err := slotdv1.NewAutoClient(c.anyConn()).SetPolicy(c.ctx(), req)
	if err != nil {
		c.t.Fatalf("auto set: %v", err)
	}
	return r
}

func (c *cluster) autoStatus() *slotdv1.AutoStatusResponse {
	c.t.Helper()
	r, err := slotdv1.NewAutoClient(c.anyConn()).Status(c.ctx(), &slotdv1.AutoStatusRequest{})
	if err != nil {
		c.t.Fatalf("auto status: %v", err)
	}
	return r
}

// autoPlans lists the plans of operator auto, newest first.
func (c *cluster) autoPlans() []*slotdv1.Plan {
	c.t.Helper()
	var out []*slotdv1.Plan
	c.admin(func(ac slotdv1.AdminClient) error {
		r, err := ac.ListPlans(c.ctx(), &slotdv1.ListPlansRequest{})
		out = slices.DeleteFunc(r.GetPlans(), func(p *slotdv1.Plan) bool { return p.GetOperator() != "auto" })
		return err
	})
	// Newest first.
	slices.SortFunc(out, func(a, b *slotdv1.Plan) int { return b.GetCreatedAt().AsTime().Compare(a.GetCreatedAt().AsTime()) })
	return out
}

func (c *cluster) slotCount(id string) int {
	for _, n := range c.status().GetNodes() {
		if n.GetNode().GetId() == id {
			return int(n.GetSlots())
		}
	}
	return 0
}

// bytesRatios returns every known active node's measured bytes over its
// fair share, as the slotd replica answers, from reports received at or
// after since (a store sizes its slots every 30 s, so a fresh figure needs
// a report that late).
func (c *cluster) bytesRatios(since time.Time) map[string]float64 {
	c.t.Helper()
	r, err := slotdv1.NewLoadClient(c.anyConn()).Get(c.ctx(), &slotdv1.GetLoadRequest{})
	if err != nil {
		c.t.Fatalf("load get: %v", err)
	}
	out := map[string]float64{}
	for _, n := range r.GetNodes() {
		if n.GetKnown() && n.GetFairBytes() > 0 && !n.GetReported().AsTime().Before(since) {
			out[n.GetNodeId()] = float64(n.GetBytes()) / n.GetFairBytes()
		}
	}
	return out
}

// sizePass is how long after a change a store's reported sizes include it.
const sizePass = 31 * time.Second

// movingPlans keeps the plans that move something (ListPlans gives counts,
// not moves).
func movingPlans(ps []*slotdv1.Plan) []*slotdv1.Plan {
	return slices.DeleteFunc(ps, func(p *slotdv1.Plan) bool { return p.GetProgress().GetMoves() == 0 })
}

func maxRatio(rs map[string]float64) (string, float64) {
	var node string
	var m float64
	for id, r := range rs {
		if r > m || r == m && id < node {
			node, m = id, r
		}
	}
	return node, m
}

// TestAutoBalance (scenario 10): the automatic balancer under a workload,
// balancing by bytes. A hot tag starts mid-run (one hash tag's keys grow to
// a third of the data on one node); within the window plus one interval an
// automatic plan runs and the node's ratio falls below 1.3. Frozen, the
// balancer plans nothing for a node that joins; unfrozen, it fills it with
// no plan command. Every automatic plan is an ordinary plan of operator
// auto; every acknowledged write survives and the history is linearizable.
func TestAutoBalance(t *testing.T) {
	full(t)
	// Every slotd and slotkv flag is also an environment variable.
	t.Setenv("SLOTD_BALANCER_TICK", "250ms")
	t.Setenv("SLOTD_MOVE_PARALLELISM", "8")
	t.Setenv("SLOTKV_LOAD_REPORT_INTERVAL", "1s")
	// The window outlasts a store's size pass (30 s): with a shorter one the
	// balancer plans again on figures taken before its last plan moved
	// anything, and overshoots (seen: 1.51, 1.24, 1.12, then 0.83 with 6 s).
	const window, interval = 35 * time.Second, 2 * time.Second
	c := newCluster(t, clusterOpts{})
	var probe []uint32
	for s := uint32(0); s < 16384; s += 1024 {
		probe = append(probe, s+7)
	}
	s := begin(c, "10 automatic balancer", []loaded{{"a10", 3000, 1000}},
		workload.Config{KeySet: keysFor("wl10", probe), Clients: 4})

	yes, zero, bytes := true, uint64(0), "bytes"
	c.setAuto(&slotdv1.SetAutoPolicyRequest{Enabled: &yes, Window: durationpb.New(window), Interval: durationpb.New(interval),
		BudgetMovesPerHour: &zero, BudgetBytesPerHour: &zero, BalanceBy: &bytes, Reason: "e2e"})
	c.h.Eventually(2*time.Minute, "the balancer sees balanced bytes", func() error {
		st := c.autoStatus().GetState()
		if st.GetState() != "watching" || st.GetDecision() != "balanced within 10%" {
			return fmt.Errorf("balancer %s: %s; bytes ratios %v", st.GetState(), st.GetDecision(), c.bytesRatios(time.Time{}))
		}
		return nil
	})
	if ps := c.autoPlans(); len(ps) > 0 {
		t.Fatalf("balanced, yet %d automatic plans: %v", len(ps), ps[0])
	}

	// The hot tag: a third as much data again, in one slot.
	hotStart := time.Now()
	hot := loaded{"{hot10}", 1000, 1000}
	c.load(hot.prefix, hot.keys, hot.size)
	s.loads = append(s.loads, hot)
	var seen time.Time
	var hotNode string
	c.h.Eventually(2*time.Minute, "the hot node's bytes ratio above the band", func() error {
		id, r := maxRatio(c.bytesRatios(time.Time{}))
		if r <= 1.1 {
			return fmt.Errorf("max bytes ratio %.2f (%s)", r, id)
		}
		seen, hotNode = time.Now(), id
		t.Logf("hot tag: %s bytes ratio %.2f, %v after the tag started", id, r, seen.Sub(hotStart).Round(time.Millisecond))
		return nil
	})
	var plan *slotdv1.Plan
	c.h.Eventually(2*time.Minute, "an automatic plan for the hot node", func() error {
		ps := movingPlans(c.autoPlans())
		if len(ps) == 0 {
			return fmt.Errorf("no automatic plan that moves yet; balancer: %s", c.autoStatus().GetState().GetDecision())
		}
		plan = ps[0]
		return nil
	})
	after := plan.GetCreatedAt().AsTime().Sub(seen)
	t.Logf("automatic plan %s %v after the test saw the ratio above the band (window %v, interval %v): %q, %d moves",
		plan.GetId(), after.Round(time.Millisecond), window, interval, plan.GetReason(), plan.GetProgress().GetMoves())
	if after > window+interval+5*time.Second {
		t.Errorf("the automatic plan came %v after the imbalance was seen; want within the window plus one interval (%v)", after, window+interval)
	}
	plan = c.waitPlan(plan.GetId(), 5*time.Minute)
	// The hot node's ratio, from sizes taken after the plan (the balancer
	// may plan again meanwhile, as it would in production).
	done := plan.GetUpdatedAt().AsTime()
	c.h.Eventually(3*time.Minute, "the hot node below 1.3", func() error {
		rs := c.bytesRatios(done.Add(sizePass))
		if r, ok := rs[hotNode]; !ok || r >= 1.3 {
			return fmt.Errorf("%s bytes ratio %.2f (known from a fresh report: %v)", hotNode, r, ok)
		}
		return nil
	})
	t.Logf("after the plan: bytes ratios %v", c.bytesRatios(done.Add(sizePass)))
	c.h.Eventually(2*time.Minute, "no automatic plan applying", func() error {
		for _, p := range c.autoPlans() {
			if st := p.GetState(); st == slotdv1.PlanState_PLAN_STATE_APPLYING || st == slotdv1.PlanState_PLAN_STATE_PAUSED {
				return fmt.Errorf("plan %s %s", p.GetId(), st)
			}
		}
		return nil
	})

	// Frozen: the balancer sees a new node and plans nothing, tick after
	// tick, for longer than a window and an interval.
	c.setAuto(&slotdv1.SetAutoPolicyRequest{Frozen: &yes, Reason: "e2e: freeze"})
	before := len(c.autoPlans())
	c.startNode("n4")
	c.waitRegistered("n4")
	var frozenSince time.Time
	c.h.Eventually(30*time.Second, "the balancer frozen", func() error {
		st := c.autoStatus().GetState()
		if st.GetState() != "frozen" || st.GetDecidedAt() == nil {
			return fmt.Errorf("balancer %s: %s", st.GetState(), st.GetDecision())
		}
		frozenSince = st.GetDecidedAt().AsTime()
		return nil
	})
	c.h.Eventually(60*time.Second, "the freeze outlasts a window and an interval", func() error {
		if n := len(c.autoPlans()); n != before || c.slotCount("n4") != 0 {
			t.Fatalf("frozen since %v: %d automatic plans (had %d), n4 owns %d slots", frozenSince, n, before, c.slotCount("n4"))
		}
		if d := time.Since(frozenSince); d < window+interval+time.Second {
			return fmt.Errorf("frozen for %v", d)
		}
		return nil
	})

	// Unfrozen: a plan of operator auto fills n4, with no command.
	no := false
	c.setAuto(&slotdv1.SetAutoPolicyRequest{Frozen: &no, Reason: "e2e: unfreeze"})
	c.h.Eventually(2*time.Minute, "an automatic plan for n4", func() error {
		ps := movingPlans(c.autoPlans())
		if len(ps) == 0 || !ps[0].GetCreatedAt().AsTime().After(frozenSince) {
			return fmt.Errorf("no new automatic plan yet; balancer: %s", c.autoStatus().GetState().GetDecision())
		}
		plan = ps[0]
		return nil
	})
	if plan.GetReason() != "auto: fill new node n4" {
		t.Errorf("automatic plan %s: reason %q, want the fill", plan.GetId(), plan.GetReason())
	}
	plan = c.waitPlan(plan.GetId(), 5*time.Minute)
	for _, m := range plan.GetMoves() {
		if m.GetTo() != "n4" {
			t.Fatalf("automatic move %v does not fill n4", m)
		}
	}
	done = plan.GetUpdatedAt().AsTime()
	c.h.Eventually(2*time.Minute, "n4 holds data", func() error {
		if r, ok := c.bytesRatios(done.Add(sizePass))["n4"]; !ok || r < 0.5 {
			return fmt.Errorf("n4 bytes ratio %.2f (known from a fresh report: %v)", r, ok)
		}
		return nil
	})
	s.finish()
	t.Logf("fill: plan %s, %d moves; n4 owns %d slots; bytes ratios %v", plan.GetId(), plan.GetProgress().GetMoves(), c.slotCount("n4"), c.bytesRatios(done.Add(sizePass)))
}
