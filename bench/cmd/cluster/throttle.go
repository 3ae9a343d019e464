package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// Item 5, the throttle's accuracy target: while a plan copies continuously from one
// donor, every 1-s window within 5% of the throttle, at 5 and 20 MB/s.
// Each rate gets its own plan of slots holding data, all on n1, moved to
// n2 at slotd's defaults (a donor copies one slot holding data at a time,
// the next one begun and waiting), so the donor copies for about
// throttleSeconds without a break.
const (
	throttleSlotBytes = 5 << 20 // per slot: 80 values of 64 KiB
	throttleValue     = 64 << 10
	throttleSeconds   = 7
)

var throttleRates = []uint64{5_000_000, 20_000_000}

// throttleSet is the data item 5 moves: for each rate, the slots of its
// plan.
type throttleSet map[uint64][]slots.Slot

// loadThrottleSet writes item 5's slots on n1 (before the nodes turn
// durable: the load is not what is measured).
func loadThrottleSet(ctx context.Context, oc *ourCluster, skip map[int]bool) (throttleSet, error) {
	set := throttleSet{}
	for _, rate := range throttleRates {
		n := int(math.Ceil(float64(rate) * throttleSeconds / throttleSlotBytes))
		for range n {
			t, s := oc.ourTag("n1", skip)
			skip[s.Int()] = true
			set[rate] = append(set[rate], s)
			if err := oc.put(ctx, throttleSlotBytes/throttleValue, throttleValue, 16, func(i int) string { return "{" + t + "}:" + strconv.Itoa(i) }); err != nil {
				return nil, err
			}
		}
		logf("item 5: loaded %d slots of %d MiB on n1 for %d MB/s", n, throttleSlotBytes>>20, rate/1e6)
	}
	return set, nil
}

// itemThrottle applies, at each rate, a plan moving that rate's slots
// n1 -> n2, sampling slotd's moved-bytes counter every second.
func itemThrottle(ctx context.Context, oc *ourCluster, set throttleSet) ([]row, error) {
	var rows []row
	for _, rate := range throttleRates {
		logf("item 5: throttle %d MB/s, a plan of %d slots (load %s)", rate/1e6, len(set[rate]), loadavg())
		if err := oc.throttle(ctx, rate); err != nil {
			return nil, err
		}
		p := &slotdv1.Plan{Id: fmt.Sprintf("bench-throttle-%d", rate/1e6), Operator: "bench", Reason: "bench item 5"}
		for _, s := range set[rate] {
			p.Moves = append(p.Moves, &slotdv1.PlannedMove{Slot: uint32(s.Int()), From: "n1", To: "n2", Bytes: throttleSlotBytes})
		}
		if _, err := oc.admin.SubmitPlan(ctx, &slotdv1.SubmitPlanRequest{Plan: p, Operator: "bench"}); err != nil {
			return nil, fmt.Errorf("submit throttle plan: %w", err)
		}
		type sample struct {
			at    time.Time
			bytes float64
		}
		var mu sync.Mutex // guards samples
		var samples []sample
		sctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		take := func() {
			if m, err := oc.metrics(); err == nil {
				mu.Lock()
				samples = append(samples, sample{time.Now(), m["slotd_mover_bytes_moved_total"]})
				mu.Unlock()
			}
		}
		take()
		if _, err := oc.admin.Apply(ctx, &slotdv1.ApplyRequest{PlanId: p.Id, Operator: "bench"}); err != nil {
			stop()
			return nil, fmt.Errorf("apply throttle plan: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-sctx.Done():
					return
				case <-tick.C:
					take()
				}
			}
		}()
		err := oc.waitPlan(ctx, p.Id)
		stop()
		wg.Wait()
		if err != nil {
			return nil, err
		}
		take() // the end: the last window is partial
		var rates []float64
		for i := 1; i < len(samples); i++ {
			rates = append(rates, (samples[i].bytes-samples[i-1].bytes)/samples[i].at.Sub(samples[i-1].at).Seconds())
		}
		// Every window of the plan counts but the first (the bucket's
		// burst, and the plan starting) and the last, partial one.
		if len(rates) > 2 {
			rates = rates[1 : len(rates)-1]
		}
		mn, mx, worst := math.Inf(1), 0.0, 0.0
		for _, r := range rates {
			mn, mx = min(mn, r), max(mx, r)
			worst = max(worst, math.Abs(r-float64(rate))/float64(rate))
		}
		met := "met"
		if worst > 0.05 || len(rates) == 0 {
			met = "NOT met"
		}
		med := medianF(rates)
		rows = append(rows, row{
			fmt.Sprintf("throttle %d MB/s, a plan copying %d slots of %d MiB from one donor: every 1-s window, min / median / max (%d windows); target: each within 5%% of the setting: %s (worst %.1f%%)",
				rate/1e6, len(set[rate]), throttleSlotBytes>>20, len(rates), met, worst*100),
			fmt.Sprintf("%.2f / %.2f / %.2f MB/s", mn/1e6, med/1e6, mx/1e6), fmt.Sprintf("setting %d MB/s", rate/1e6),
			ratio(float64(rate), med),
			fmt.Sprintf("`slotctl throttle %dMB`, then a plan of %d moves n1 -> n2 submitted and applied (Admin.SubmitPlan, Admin.Apply) at slotd's defaults; `cd bench && go run ./cmd/cluster -items 2,5`", rate/1e6, len(set[rate]))})
	}
	return rows, oc.throttle(ctx, 0)
}
