package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slotkv/workload"
	"github.com/slotd/slotd/slots"
)

// opsRatios reads every node's measured ops ratio (load over its fair
// share) from a slotd's load aggregate; unknown nodes are left out.
func (c *cluster) opsRatios() (map[string]float64, error) {
	r, err := slotdv1.NewLoadClient(c.anyConn()).Get(c.ctx(), &slotdv1.GetLoadRequest{})
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, n := range r.GetNodes() {
		if n.GetKnown() && n.GetFairOps() > 0 {
			out[n.GetNodeId()] = (n.GetReads_10M() + n.GetWrites_10M()) / n.GetFairOps()
		}
	}
	return out, nil
}

// TestHotTagLoadAwarePlan (scenario 11): a hash tag turns hot under
// traffic; its node's measured ops climb past 1.3 of its share; a
// load-aware plan (auto: bytes and ops) keeps the tag's slot where it is,
// moves other busy slots off its node, and the measured ratio falls below
// 1.3, with no write lost and a linearizable history.
func TestHotTagLoadAwarePlan(t *testing.T) {
	c := newCluster(t, clusterOpts{nodeArgs: []string{"--load-report-interval", "1s"}})
	hotSlot := slots.ForString("{hot}")
	hot := c.sdk.Map().RouteSlot(hotSlot).Owner()

	// 8 keys under the tag (a quarter of the requests: a node's share is a
	// third, its band's top 37%, so the tag is movable, not a hot spot),
	// 12 in other slots of its node and 6 in slots of each other node: the
	// hot node carries about 60% before the plan.
	var keys []string
	for i := range 8 {
		keys = append(keys, fmt.Sprintf("{hot}:%d", i))
	}
	var spread []uint32
	per := map[string]int{}
	for sl := 0; sl < slots.Count; sl += 97 {
		o := c.sdk.Map().RouteSlot(slots.MustNew(sl)).Owner()
		want := 6
		if o == hot {
			want = 12
		}
		if sl != hotSlot.Int() && per[o] < want {
			per[o]++
			spread = append(spread, uint32(sl))
		}
	}
	keys = append(keys, keysFor("wl11", spread)...)
	s := begin(c, "11 hot tag, load-aware plan", []loaded{{"s11", 1500, 100}},
		workload.Config{KeySet: keys, Clients: 4, Rate: 300})

	var before map[string]float64
	c.h.Eventually(90*time.Second, fmt.Sprintf("%s, owner of the hot tag, measured above 1.3 of its ops share", hot), func() error {
		r, err := c.opsRatios()
		if err != nil {
			return err
		}
		// Every node's traffic seen (a node's first averages read zero
		// until its first fold), and the hot node past 1.3.
		if len(r) < 3 || r[hot] <= 1.3 || slices.Contains(slices.Collect(maps.Values(r)), 0) {
			return fmt.Errorf("ops ratios %v", r)
		}
		before = r
		return nil
	})

	p := c.plan(&slotdv1.PlanRequest{BalanceBy: "auto", Reason: "e2e: hot tag"})
	if len(p.GetMoves()) == 0 {
		t.Fatalf("no moves for a hot node (%v): %s", before, p.GetNote())
	}
	// auto balances bytes too, so other nodes may give; the hot node must.
	gives := 0
	for _, m := range p.GetMoves() {
		if m.GetFrom() == hot {
			gives++
		}
		if m.GetSlot() == uint32(hotSlot.Int()) {
			t.Errorf("the hot tag's slot %d moves; %s should keep it and give the rest", hotSlot.Int(), hot)
		}
	}
	if gives == 0 {
		t.Errorf("no move out of the hot node %s", hot)
	}
	for _, n := range p.GetNodes() {
		if n.GetNodeId() == hot && n.GetLoadAfter().GetOpsRatio() >= 1.3 {
			t.Errorf("planned ops ratio of %s: %.2f -> %.2f, want below 1.3", hot, n.GetLoadBefore().GetOpsRatio(), n.GetLoadAfter().GetOpsRatio())
		}
	}
	c.apply(p.GetId())
	c.waitPlan(p.GetId(), 3*time.Minute)

	var after map[string]float64
	c.h.Eventually(90*time.Second, fmt.Sprintf("%s measured below 1.3 of its ops share", hot), func() error {
		r, err := c.opsRatios()
		if err != nil {
			return err
		}
		if len(r) < 3 || r[hot] >= 1.3 {
			return fmt.Errorf("ops ratios %v", r)
		}
		after = r
		return nil
	})
	s.finish()
	var b strings.Builder
	for _, id := range []string{"n1", "n2", "n3"} {
		fmt.Fprintf(&b, " %s %.2f -> %.2f", id, before[id], after[id])
	}
	t.Logf("hot node %s; measured ops ratios%s; %d moves, %d bytes", hot, b.String(), len(p.GetMoves()), p.GetTotalBytes())
}
