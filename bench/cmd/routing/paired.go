package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slotd/slotd/bench/internal/host"
)

// A loop runs n lookups over the keys, starting at key off, and returns a
// word derived from every result (a sum the caller stores once), so that the
// compiler keeps each lookup and goroutines running loops at once share no
// sink. The floor and Route use the same loop shape over the same keys.
type loop func(n, off int) uint64

// pairedResult is the item-6 ratio measured side by side.
type pairedResult struct {
	pairs, blocks   int
	floorNs, oursNs float64 // medians of the chunks' ns/op
	ratio           float64 // median over pairs of ours / floor
	q1, q3          float64 // quartiles of the per-pair ratio
	worst           float64 // the highest block median of the ratio
}

// measurePaired times chunks of one pass over the keys (numKeys lookups,
// some 100 µs, after an untimed pass), one of the floor and one of ours back
// to back, in alternating order, and takes the ratio within each pair: noise on this
// shared machine comes in bursts of milliseconds to seconds, which a pair
// sees on both sides, where two testing.Benchmark runs seconds apart do not.
// The pairs are cut into blocks, each a short run of its own; the verdict
// asks every block's median to meet the target, not just the overall one.
func measurePaired(floorLoop, oursLoop loop, pairs, blocks int) pairedResult {
	// A chunk first runs one pass untimed: the other side's pass has just
	// streamed the keys through the caches, and Route's tables (48 KiB at
	// 1,000 nodes) would otherwise start each timed pass cold, which no
	// steady state does.
	chunk := func(l loop) float64 {
		sinkU += l(numKeys, 0)
		start := time.Now()
		sinkU += l(numKeys, 0)
		return float64(time.Since(start).Nanoseconds()) / numKeys
	}
	for range 20 { // warm up caches, branch predictors and the clock
		chunk(floorLoop)
		chunk(oursLoop)
	}
	fs, os_, rs := make([]float64, pairs), make([]float64, pairs), make([]float64, pairs)
	for i := range pairs {
		var f, o float64
		if i%2 == 0 {
			f, o = chunk(floorLoop), chunk(oursLoop)
		} else {
			o, f = chunk(oursLoop), chunk(floorLoop)
		}
		fs[i], os_[i], rs[i] = f, o, o/f
	}
	res := pairedResult{pairs: pairs, blocks: blocks, floorNs: median(fs), oursNs: median(os_), ratio: median(rs)}
	sorted := slices.Clone(rs)
	slices.Sort(sorted)
	res.q1, res.q3 = sorted[pairs/4], sorted[pairs*3/4]
	size := pairs / blocks
	for b := range blocks {
		res.worst = max(res.worst, median(rs[b*size:(b+1)*size]))
	}
	return res
}

// cpuMetric is the goroutine rows' CPU time per lookup per goroutine.
const cpuMetric = "cpu-ns/op"

// parallel returns a benchmark that runs l from g goroutines at once, each
// b.N lookups from its own offset into the keys: ns/op is then the time per
// lookup of each goroutine while the others run too. Each goroutine also
// reads its thread's CPU clock around its loop (cpuMetric, the mean over
// goroutines): time spent waiting for a core does not count there, so it
// stays flat with more goroutines unless they slow each other down (a
// shared cache line written, say), whatever else the machine runs.
func parallel(g int, l loop) func(b *testing.B) {
	return func(b *testing.B) {
		// A cache line apart, written once each.
		sums, cpu := make([]uint64, 8*g), make([]float64, 8*g)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j := range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread() // the thread's CPU clock is the goroutine's
				defer runtime.UnlockOSThread()
				<-start
				t0 := threadCPU()
				sums[8*j] = l(b.N, j*(numKeys/4+1))
				cpu[8*j] = float64(threadCPU()-t0) / float64(b.N)
			}()
		}
		b.ResetTimer()
		close(start)
		wg.Wait()
		b.StopTimer()
		var cpuSum float64
		for j := range g {
			sinkU += sums[8*j]
			cpuSum += cpu[8*j]
		}
		if threadCPU() >= 0 {
			b.ReportMetric(cpuSum/float64(g), cpuMetric)
		}
	}
}

// goroutineCounts are the numbers of goroutines routing at once.
var goroutineCounts = []int{1, 2, 4}

// reportItem6 prints the row of the paired ratio for n nodes and returns its
// verdict line: met when the median of every block is within 1.5x.
func reportItem6(w io.Writer, n int, p pairedResult) string {
	fmt.Fprintf(w, "| %s nodes | %d pairs (%d blocks) | %.2f ns | %.2f ns | **%.2f** | %.2f-%.2f | %.2f |\n",
		fmtInt(n), p.pairs, p.blocks, p.floorNs, p.oursNs, p.ratio, p.q1, p.q3, p.worst)
	met := p.ratio <= 1.5 && p.worst <= 1.5
	verdict := "met"
	if !met {
		verdict = "NOT met"
	}
	return fmt.Sprintf("- %s nodes: Route / bare xxhash64 = %.2f (paired median; quartiles %.2f-%.2f; worst block %.2f): within 1.5x in every block of this run: **%s**.",
		fmtInt(n), p.ratio, p.q1, p.q3, p.worst, verdict)
}

// goroutineRows prints the goroutine rows for n nodes.
func goroutineRows(w io.Writer, n int, cases []benchCase, res []result) {
	find := func(name string) float64 {
		i := slices.IndexFunc(cases, func(c benchCase) bool { return c.name == name })
		if i < 0 {
			fail(fmt.Errorf("no case %q", name))
		}
		return median(res[i].nsPerOp)
	}
	// cpu returns the median CPU ns/op of a case, 0 when not measured.
	cpu := func(name string) float64 {
		i := slices.IndexFunc(cases, func(c benchCase) bool { return c.name == name })
		if len(res[i].cpuNs) == 0 {
			return 0
		}
		return median(res[i].cpuNs)
	}
	fmtCPU := func(v float64) string {
		if v == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.1f ns", v)
	}
	one := find(parName(ours, 1))
	for _, g := range goroutineCounts {
		o, f := find(parName(ours, g)), find(parName(floor, g))
		oc, fc := cpu(parName(ours, g)), cpu(parName(floor, g))
		ratio := o / f
		if oc > 0 && fc > 0 {
			ratio = oc / fc
		}
		fmt.Fprintf(w, "| %s nodes | %d | %.1f ns | %s | %.1f | %.2f | %.1f ns | %s | %.2f |\n",
			fmtInt(n), g, o, fmtCPU(oc), float64(g)*1e3/o, o/one, f, fmtCPU(fc), ratio)
	}
}

func parName(name string, g int) string { return fmt.Sprintf("%s, %d goroutines", name, g) }

// loadAvg returns the 1-, 5- and 15-minute load averages, for the record.
func loadAvg() string { return host.LoadAverages() }

func gomaxprocs() (procs, cpus int) { return runtime.GOMAXPROCS(0), runtime.NumCPU() }
