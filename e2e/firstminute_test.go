package e2e

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slotkv/workload"
	"github.com/slotd/slotd/slots"
)

// Scenario 13: the first minute. Three nodes, skewed data just
// loaded, a fourth node started and a plan made at once: the stores' load
// reports (every 10 s, slotkv's default, kept) cannot have caught up with
// the data, so the plan must measure what the stores hold, and the load
// ratios must read the plan's "after" within one report interval.

// firstMinuteLoads is the skewed data of scenario 13: 60,000 keys, 35.6 MB
// (keys and values). One hash tag holds 5,000 values of 1,000 bytes in a
// single slot: 5.1 MB, 14% of the bytes, 0.57 of what each of four nodes
// should hold; large, yet below one node's share (and its band), so no
// plan has to name it a hot spot and the 10% bound is reachable. 6,000
// values (10%) are 4 KiB (24.6 MB), 49,000 are 110 bytes (5.9 MB), both
// spread over every slot.
func firstMinuteLoads(tag string) []loaded {
	return []loaded{
		{"{" + tag + "}", 5000, 1000},
		{tag + "s", 49000, 110},
		{tag + "b", 6000, 4096},
	}
}

// firstMinuteIDs are the nodes once the fourth has joined.
var firstMinuteIDs = []string{"n1", "n2", "n3", "n4"}

// reportInterval is slotkv's default load-report interval, which scenario
// 13 keeps.
const reportInterval = 10 * time.Second

// probeSlots are 16 slots spread over the range, for the workload.
func probeSlots() []uint32 {
	var out []uint32
	for s := uint32(0); s < slots.Count; s += 1024 {
		out = append(out, s+7)
	}
	return out
}

// firstMinuteChecks checks a plan made in the first minute, once it is
// done:
//
//  1. it measured every node (the new one known empty) and balanced what
//     the stores hold: every node within 10% of the mean in bytes, by the
//     stores' own slot stats, with no hot spot named (the hot tag is below
//     a node's share);
//  2. within one report interval of its end, the load view's bytes ratios
//     read its after: a reading with every node within 10% of the plan's
//     bytes ratio_after. The view is polled from the plan's end (its
//     updated_at) until one report interval later.
//
// hotTag is the loaded hot hash tag, whose slot is logged.
func firstMinuteChecks(c *cluster, p *slotdv1.Plan, hotTag string) {
	t := c.t
	t.Helper()
	t.Log(planText(p))
	after := map[string]float64{}
	for _, n := range p.GetNodes() {
		if !n.GetLoadKnown() {
			t.Errorf("the plan did not know the load of %s\n%s", n.GetNodeId(), planJSON(p))
		}
		after[n.GetNodeId()] = n.GetLoadAfter().GetBytesRatio()
	}
	if by := p.GetBalanceBy(); by != "auto" && by != "bytes" {
		t.Errorf("the plan balanced %q, not measured load\n%s", by, planJSON(p))
	}

	// 2 first: it is about the first report interval after the plan.
	done := p.GetUpdatedAt().AsTime()
	deadline := done.Add(reportInterval)
	var first, met, opsAtMet map[string]float64
	var firstAt, metAt time.Duration
	closest, readings := math.Inf(1), 0
	var lastErr error
	for {
		now := time.Now()
		v, err := c.loadView()
		var rs, ops map[string]float64
		if err == nil {
			rs, ops, err = viewRatios(v, firstMinuteIDs)
		}
		if err == nil {
			readings++
			if first == nil {
				first, firstAt = rs, now.Sub(done)
			}
			dev := 0.0
			for _, id := range firstMinuteIDs {
				dev = max(dev, math.Abs(rs[id]/after[id]-1))
			}
			closest = min(closest, dev)
			if dev <= 0.10 && met == nil {
				met, opsAtMet, metAt = rs, ops, now.Sub(done)
			}
			if dev > 0.10 {
				err = fmt.Errorf("bytes ratios %s, up to %.1f%% off", ratiosText(rs), 100*dev)
			}
		}
		if err != nil {
			lastErr = err
		}
		if met != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the poll's period, bounded by the deadline
	}
	t.Logf("bytes ratios after, as planned: %s", ratiosText(after))
	if first != nil {
		t.Logf("load view %v after the plan's end: %s", firstAt.Round(time.Millisecond), ratiosText(first))
	}
	if met == nil {
		t.Errorf("in the %v after the plan's end (%d readings of the load view, the closest one %.1f%% off), no reading had every bytes ratio within 10%% of the plan's after (%s); last: %v\nplan: %s",
			reportInterval, readings, 100*closest, ratiosText(after), lastErr, planJSON(p))
	} else {
		t.Logf("load view within 10%% of the plan's after %v after its end (reading %d): bytes %s; ops %s",
			metAt.Round(time.Millisecond), readings, ratiosText(met), ratiosText(opsAtMet))
		if rs, err := c.statusRatios(); err == nil {
			t.Logf("slotctl status -o json then: bytes ratios %s", ratiosText(rs))
		} else {
			t.Log(err)
		}
	}

	// 1: the stores' own figures.
	m, err := c.getMap(0)
	if err != nil {
		t.Fatal(err)
	}
	bs := c.storeBytes(m, firstMinuteIDs)
	avg := meanBytes(bs)
	t.Logf("bytes after, by the stores' slot stats: %s", bytesText(bs))
	for _, id := range firstMinuteIDs {
		if d := float64(bs[id])/avg - 1; math.Abs(d) > 0.10 {
			t.Errorf("%s holds %.2f MB, %+.1f%% off the mean %.2f MB (bound 10%%)\nplan: %s", id, float64(bs[id])/1e6, 100*d, avg/1e6, planJSON(p))
		}
	}
	if len(p.GetHotSpots()) > 0 {
		t.Errorf("the plan names hot spots %v; the hot tag is below a node's share\nplan: %s", p.GetHotSpots(), planJSON(p))
	}
	hot := slots.ForString("{" + hotTag + "}")
	owner := m.OwnerID(hot)
	if r, err := slotdv1.NewStoreClient(c.conn(c.h.Addr(owner))).SlotStats(c.ctx(), &slotdv1.SlotStatsRequest{Slots: []uint32{uint32(hot.Int())}}); err == nil && len(r.GetSlots()) == 1 {
		b := float64(r.GetSlots()[0].GetBytes())
		t.Logf("hot tag {%s}: slot %d on %s, %.2f MB, %.2f of the mean node", hotTag, hot.Int(), owner, b/1e6, b/avg)
	}
}

// TestFirstMinuteRebalance (scenario 13 a): three nodes, 60,000
// keys of skewed data (firstMinuteLoads) loaded, a fourth node started and
// `slotctl rebalance --yes` run at once: nothing is waited for but the new
// node's registration. The plan asks the stores for their slot stats, so it
// balances what they hold (its bytes before are what they held), and
// firstMinuteChecks holds. A porcupine-checked workload runs throughout.
func TestFirstMinuteRebalance(t *testing.T) {
	c := newCluster(t, clusterOpts{})
	start := time.Now()
	s := begin(c, "13 (a) first minute: rebalance", firstMinuteLoads("fm13a"),
		workload.Config{KeySet: keysFor("wl13a", probeSlots()), Clients: 4})
	loaded := time.Now()
	m, err := c.getMap(0)
	if err != nil {
		t.Fatal(err)
	}
	// What the stores hold, read alongside the fourth node's start rather
	// than before it: nothing but its registration is waited for.
	var before map[string]int64
	measured := make(chan struct{})
	go func() {
		defer close(measured)
		before = c.storeBytes(m, firstMinuteIDs[:3])
	}()
	c.startNode("n4")
	c.waitRegistered("n4")
	// What the reports said as the rebalance began (the log shows them
	// behind the data).
	v, verr := c.loadView()
	began := time.Now()
	p := c.slotctlPlan(5*time.Minute, "rebalance", "--yes", "-o", "json", "--reason", "e2e: first minute")
	ended := time.Now()
	<-measured
	t.Logf("loaded in %v; the rebalance began %v after the load and took %v",
		loaded.Sub(start).Round(time.Millisecond), began.Sub(loaded).Round(time.Millisecond), ended.Sub(began).Round(time.Millisecond))
	t.Logf("bytes before, by the stores' slot stats: %s", bytesText(before))
	if verr == nil {
		t.Logf("load reports as the rebalance began: %s", reportsText(v))
	}
	if p.GetState() != slotdv1.PlanState_PLAN_STATE_DONE {
		t.Fatalf("the rebalance ended %s: %s\n%s", p.GetState(), p.GetError(), planJSON(p))
	}
	for _, n := range p.GetNodes() {
		if want := before[n.GetNodeId()]; math.Abs(float64(n.GetBytesBefore())-float64(want)) > 0.01*float64(want) {
			t.Errorf("the plan's bytes before of %s: %d; its store held %d\n%s", n.GetNodeId(), n.GetBytesBefore(), want, planJSON(p))
		}
	}
	firstMinuteChecks(c, p, "fm13a")
	s.finish()
}

// TestFirstMinuteAutoBalance (scenario 13 b): as 13 a, with
// `slotctl auto on` instead of the rebalance, right after the fourth node
// registered; see firstMinuteAuto. The policy balances bytes, as scenario
// 10's does.
func TestFirstMinuteAutoBalance(t *testing.T) {
	full(t)
	firstMinuteAuto(t, "13 (b) first minute: auto balancer", "fm13b", "bytes")
}

// TestFirstMinuteAutoBalanceDefault (scenario 13 c): 13 b with
// the policy's default mode, auto (bytes and ops), as `slotctl auto on`
// runs it unless told otherwise. The bulk load's writes are ops too: after
// the fill, the old nodes' ~10-minute averages still carry them while the
// new node's gained slots read their rate since the gain (about nothing),
// and the fill plan itself saw no ops at all (the reports it read were
// from before the load); this scenario holds the balancer to the same
// promise, no second automatic plan.
//
// Skipped unless E2E_KNOWN_GAPS=1: it passed once, which is not yet
// evidence. The fill plan sees the rates of the last seconds (the stores'
// answers carry them) and balances bytes and ops together (every node
// within 1.01 in bytes, 0.95-1.05 in ops), and the balancer stores no plan
// when the stores' figures of now are balanced. What is not understood:
// in the 45 s after the fill, the view from the load reports drifts to
// ops ratios of 0.81-1.24 while the stores' own figures stay within the
// band. The averages of a cluster this young are plain means since its
// start, so the bulk load's writes fade from them within seconds while the
// workload's, on 16 slots, do not; whether that explains all of the drift,
// or the view adds some, is open.
func TestFirstMinuteAutoBalanceDefault(t *testing.T) {
	full(t)
	if os.Getenv("E2E_KNOWN_GAPS") == "" {
		t.Skip("known gap: the view's ops ratios drift from the stores' own figures after the fill; E2E_KNOWN_GAPS=1 runs it")
	}
	firstMinuteAuto(t, "13 (c) first minute: auto, default", "fm13c", "")
}

// firstMinuteAuto runs scenario 13 with `slotctl auto on` instead of the
// rebalance, right after the fourth node registered, with the policy
// balancing balanceBy ("": the policy's default, auto). The balancer
// fills n4 at once ("auto: fill new node n4"); firstMinuteChecks holds for
// its plan, and no second automatic plan follows while the cluster is
// watched for three windows after the first plan's end.
//
// The policy is otherwise scenario 10's: budgets off (the default 1,024
// moves an hour would cut the fill, about 1,300 moves here, and leave an
// imbalance that rightly calls for a second plan), a 2-s interval, and
// slotd deciding every 250 ms. The window is 15 s: longer than a report
// interval (10 s), since the view may read the reports from before the
// load for up to one interval after the plan (13 a's log shows it), yet
// far shorter than the minutes the ratios lagged when a moved slot's
// load stayed with its old owner's report. The
// bound, three windows (45 s) after the plan's end, is enough: a second
// plan needs an imbalance that lasts a whole window, and every node's
// figures are fresh within one report interval of the plan's end (each
// node reports again, and a moved slot counts at its new owner meanwhile);
// so an imbalance the first plan left, or the view invented, is seen for a
// window by 10 s + 15 s + the 2-s interval after the end, well inside 45 s.
func firstMinuteAuto(t *testing.T, name, tag, balanceBy string) {
	t.Setenv("SLOTD_BALANCER_TICK", "250ms")
	const window, interval = 15 * time.Second, 2 * time.Second
	const observe = 3 * window
	c := newCluster(t, clusterOpts{})
	set := []string{"auto", "set", "window=" + window.String(), "interval=" + interval.String(), "budget-moves=0", "budget-bytes=0"}
	if balanceBy != "" {
		set = append(set, "balance-by="+balanceBy)
	}
	if out, errOut, code := c.slotctl(append(set, "--reason", "e2e: first minute")...); code != 0 {
		t.Fatalf("slotctl auto set: exit %d\n%s%s", code, out, errOut)
	}
	s := begin(c, name, firstMinuteLoads(tag), workload.Config{KeySet: keysFor("wl"+tag, probeSlots()), Clients: 4})
	loaded := time.Now()
	c.startNode("n4")
	c.waitRegistered("n4")
	if out, errOut, code := c.slotctl("auto", "on", "--reason", "e2e: first minute"); code != 0 {
		t.Fatalf("slotctl auto on: exit %d\n%s%s", code, out, errOut)
	}
	on := time.Now()
	var id string
	c.h.Eventually(60*time.Second, "an automatic plan", func() error {
		ps := movingPlans(c.autoPlans())
		if len(ps) == 0 {
			return fmt.Errorf("no automatic plan that moves yet; balancer: %s", c.autoStatus().GetState().GetDecision())
		}
		id = ps[0].GetId()
		return nil
	})
	c.waitPlan(id, 5*time.Minute)
	p := c.slotctlPlan(time.Minute, "plans", "show", id, "-o", "json")
	t.Logf("auto on %v after the load; plan %s made %v after auto on", on.Sub(loaded).Round(time.Millisecond), id,
		p.GetCreatedAt().AsTime().Sub(on).Round(time.Millisecond))
	firstMinuteChecks(c, p, tag)

	// No second automatic plan (moving or not: an empty one would mean the
	// balancer saw an imbalance last a window) in three windows after the
	// plan's end.
	done := p.GetUpdatedAt().AsTime()
	var worst float64
	var worstText string
	for {
		ps := c.autoPlans()
		if len(ps) != 1 {
			var b strings.Builder
			for _, q := range ps {
				fmt.Fprintf(&b, "\n%s\n%s", planText(q), planJSON(q))
			}
			t.Fatalf("%d automatic plans %v after the first one's end (bound: %v); balancer: %s:%s",
				len(ps), time.Since(done).Round(time.Millisecond), observe, c.autoStatus().GetState().GetDecision(), b.String())
		}
		if v, err := c.loadView(); err == nil {
			if rs, ops, err := viewRatios(v, firstMinuteIDs); err == nil {
				for _, r := range rs {
					if d := math.Abs(r - 1); d >= worst {
						worst = d
						worstText = fmt.Sprintf("bytes %s (ops %s) %v after the end", ratiosText(rs), ratiosText(ops), time.Since(done).Round(time.Millisecond))
					}
				}
			}
		}
		if time.Since(done) > observe {
			break
		}
		time.Sleep(500 * time.Millisecond) // the poll's period, within the bounded observation
	}
	st := c.autoStatus().GetState()
	t.Logf("automatic plans %v after the first one's end: %d (the first included); bytes ratio farthest from 1 in that time (from the checks' end): %s; balancer %s: %s",
		observe, len(c.autoPlans()), worstText, st.GetState(), st.GetDecision())
	s.finish()
}
