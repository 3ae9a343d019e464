package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
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

// parallel returns a benchmark that runs l from g goroutines at once, each
// b.N lookups from its own offset into the keys: ns/op is then the time per
// lookup of each goroutine while the others run too.
func parallel(g int, l loop) func(b *testing.B) {
	return func(b *testing.B) {
		sums := make([]uint64, 8*g) // a cache line apart, written once each
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j := range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				sums[8*j] = l(b.N, j*(numKeys/4+1))
			}()
		}
		b.ResetTimer()
		close(start)
		wg.Wait()
		b.StopTimer()
		for j := range g {
			sinkU += sums[8*j]
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
	one := find(parName(ours, 1))
	for _, g := range goroutineCounts {
		o, f := find(parName(ours, g)), find(parName(floor, g))
		fmt.Fprintf(w, "| %s nodes | %d | %.1f ns | %.1f | %.2f | %.1f ns | %.2f |\n",
			fmtInt(n), g, o, float64(g)*1e3/o, o/one, f, o/f)
	}
}

func parName(name string, g int) string { return fmt.Sprintf("%s, %d goroutines", name, g) }

// loadAvg returns the 1-, 5- and 15-minute load averages, for the record.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func gomaxprocs() (procs, cpus int) { return runtime.GOMAXPROCS(0), runtime.NumCPU() }
