package mover

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// BenchmarkThrottle measures the donor's throttle as an operator sees it:
// slotd_mover_bytes_moved_total sampled every second while a plan copies.
//
// steady-5MB/s and steady-20MB/s run a plan of slots of 4 MB on one donor
// for about 6 s at the default parallelism (one slot holding data per
// donor at a time, the next starting once the previous is fenced) and
// report the lowest and highest 1-s window and the worst deviation from
// the setting (the first window, the token bucket's burst, and the last,
// partial one left out); the target is every window within 5%.
// What decides it: the gaps between one move's copy and the next
// (gap-p50-ms, gap-max-ms: the donor's idle time between Export streams;
// the next data move begins at the previous one's fence and the bucket's
// burst pays a short gap back); the batch (bytes are counted a batch at a
// time, so a window holds a whole number of batches: batches of a quarter
// second of the rate made windows at 5 MB/s 4 or 5 batches, 20% apart;
// batches of 20 ms, node throttledBatch, make them 2% apart); and the
// bucket's burst (a donor held up for a moment, by a slow target or a
// starved CPU, sends the burst above the rate afterwards: 200 ms of it
// made the next window 20% high, 20 ms makes it 2%).
//
// change-2to4MB/s moves 20 MB (10 slots of 2 MB) at 2 MB/s, switching to
// 4 MB/s half way, and reports the rate over whole seconds at each setting
// and how long the new rate took to show.
func BenchmarkThrottle(b *testing.B) {
	for _, rate := range []int64{5_000_000, 20_000_000} {
		b.Run(fmt.Sprintf("steady-%dMB/s", rate/1_000_000), func(b *testing.B) { benchThrottleSteady(b, rate) })
	}
	b.Run("change-2to4MB/s", benchThrottleChange)
}

func benchThrottleSteady(b *testing.B, rate int64) {
	const slotBytes = 4_000_000
	nSlots := int(6 * rate / slotBytes)
	for b.Loop() {
		c := newClusterTB(b, 2)
		e, _ := c.startExecutor("bench")
		snap, _ := c.dir.Snapshot(c.ctx)
		mine := snap.SlotsOf("n1")
		p := &Plan{ID: "throttle-steady"}
		for s := range mine.All() {
			if len(p.Moves) == nSlots {
				break
			}
			fillSlot(b, c.nodes["n1"], s, slotBytes/10_000, 10_000-len(keysInSlots(map[int]bool{s.Int(): true}, 1)[0]))
			p.Moves = append(p.Moves, PlannedMove{Slot: s.Int(), From: "n1", To: "n2", Bytes: slotBytes})
		}
		// The donor's idle time between one Export stream's last batch and
		// the next stream's start.
		var gmu sync.Mutex // guards gaps and ended
		var gaps []time.Duration
		var ended time.Time
		onExport := func(_ string, _ uint32, start bool) {
			gmu.Lock()
			defer gmu.Unlock()
			if !start {
				ended = time.Now()
			} else if !ended.IsZero() {
				gaps = append(gaps, time.Since(ended))
			}
		}
		c.onExport.Store(&onExport)
		if err := c.ctl.SetThrottle(c.ctx, rate, "bench"); err != nil {
			b.Fatal(err)
		}
		if _, err := c.ctl.Submit(c.ctx, p, "bench"); err != nil {
			b.Fatal(err)
		}
		if _, err := c.ctl.Apply(c.ctx, p.ID, "bench"); err != nil {
			b.Fatal(err)
		}
		total := float64(slotBytes * nSlots)
		var rates []float64
		last, lastAt := testutilValue(e.m.bytesMoved), time.Now()
		tick := time.NewTicker(time.Second)
		for got := last; got < total*0.999; {
			<-tick.C
			got = testutilValue(e.m.bytesMoved)
			now := time.Now()
			rates = append(rates, (got-last)/now.Sub(lastAt).Seconds())
			last, lastAt = got, now
			if len(rates) > 120 {
				b.Fatal("plan still copying after 2 minutes")
			}
		}
		tick.Stop()
		if len(rates) < 3 {
			b.Fatalf("%d windows", len(rates))
		}
		full := rates[1 : len(rates)-1]
		lo, hi, worst := math.Inf(1), 0.0, 0.0
		for _, r := range full {
			lo, hi = min(lo, r), max(hi, r)
			worst = max(worst, math.Abs(r-float64(rate))/float64(rate))
		}
		b.ReportMetric(lo/1e6, "min-MB/s")
		b.ReportMetric(hi/1e6, "max-MB/s")
		b.ReportMetric(worst*100, "worst-window-dev-%")
		b.ReportMetric(float64(len(full)), "windows")
		gmu.Lock()
		b.ReportMetric(float64(quantile(gaps, 0.5).Microseconds())/1000, "gap-p50-ms")
		b.ReportMetric(float64(quantile(gaps, 1).Microseconds())/1000, "gap-max-ms")
		gmu.Unlock()
	}
}

func benchThrottleChange(b *testing.B) {
	const slotBytes, nSlots = 2_000_000, 10
	for b.Loop() {
		c := newClusterTB(b, 2)
		e, _ := c.startExecutor("bench")
		snap, _ := c.dir.Snapshot(c.ctx)
		mine := snap.SlotsOf("n1")
		p := &Plan{ID: "throttle-bench"}
		for s := range mine.All() {
			if len(p.Moves) == nSlots {
				break
			}
			fillSlot(b, c.nodes["n1"], s, slotBytes/10_000, 10_000-len(keysInSlots(map[int]bool{s.Int(): true}, 1)[0]))
			p.Moves = append(p.Moves, PlannedMove{Slot: s.Int(), From: "n1", To: "n2"})
		}
		if err := c.ctl.SetThrottle(c.ctx, 2_000_000, "bench"); err != nil {
			b.Fatal(err)
		}
		if _, err := c.ctl.Submit(c.ctx, p, "bench"); err != nil {
			b.Fatal(err)
		}
		type sample struct {
			at    time.Time
			bytes float64
		}
		var samples []sample
		start := time.Now()
		if _, err := c.ctl.Apply(c.ctx, p.ID, "bench"); err != nil {
			b.Fatal(err)
		}
		var changedAt time.Time
		for {
			got := testutilValue(e.m.bytesMoved)
			samples = append(samples, sample{time.Now(), got})
			if changedAt.IsZero() && got >= slotBytes*nSlots/2 {
				if err := c.ctl.SetThrottle(c.ctx, 4_000_000, "bench"); err != nil {
					b.Fatal(err)
				}
				changedAt = time.Now()
			}
			if got >= slotBytes*nSlots*0.99 || time.Since(start) > 60*time.Second {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		rate := func(from, to time.Time) float64 {
			var a, z *sample
			for i := range samples {
				if a == nil && !samples[i].at.Before(from) {
					a = &samples[i]
				}
				if !samples[i].at.After(to) {
					z = &samples[i]
				}
			}
			if a == nil || z == nil || !z.at.After(a.at) {
				return 0
			}
			return (z.bytes - a.bytes) / z.at.Sub(a.at).Seconds()
		}
		r1 := rate(start.Add(time.Second), changedAt)
		r2 := rate(changedAt.Add(time.Second), samples[len(samples)-1].at)
		b.ReportMetric(r1/1e6, "MB/s@2")
		b.ReportMetric(r2/1e6, "MB/s@4")
		// Time until the rate over a sliding half second first reached 90%
		// of the new setting.
		settle := -1.0
		for i := range samples {
			if samples[i].at.Before(changedAt) {
				continue
			}
			if r := rate(samples[i].at, samples[i].at.Add(500*time.Millisecond)); r >= 0.9*4_000_000 {
				settle = samples[i].at.Sub(changedAt).Seconds()
				break
			}
		}
		b.ReportMetric(settle, "s-to-new-rate")
	}
}

func testutilValue(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }
