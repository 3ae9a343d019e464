package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
)

// The load item (load-aware planning): a skewed workload on a real cluster, 3 -> 4
// nodes, planned by slot counts (the policy of redis-cli --cluster
// rebalance) and by measured load; then one hash tag turns hot enough that
// no move can fix it, and the plan names it.
const (
	loadKeys    = 100_000
	loadZipfS   = 1.1
	loadMinV    = 100
	loadMaxV    = 4096
	loadTag     = "cart7"
	loadTagKeys = 40
	loadRate    = 2000 // requests per second over all workers
)

// loadTraffic runs Zipfian reads and writes, with tagShare of them on the
// tag's keys, until stop; tagShare can change while it runs.
type loadTraffic struct {
	oc       *ourCluster
	tagShare atomic.Uint64 // math.Float64bits
	ops      atomic.Int64
	errs     atomic.Int64
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

func valueSize(i int) int {
	r := rand.New(rand.NewPCG(uint64(i), 14))
	return loadMinV + r.IntN(loadMaxV-loadMinV+1)
}

func startLoadTraffic(ctx context.Context, oc *ourCluster, tagShare float64) *loadTraffic {
	ctx, cancel := context.WithCancel(ctx)
	t := &loadTraffic{oc: oc, stop: cancel}
	t.tagShare.Store(math.Float64bits(tagShare))
	const workers = 8
	for w := range workers {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			z := rand.NewZipf(rand.New(rand.NewPCG(uint64(w), 2)), loadZipfS, 1, loadKeys-1)
			tick := time.NewTicker(time.Second * workers / loadRate)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				var key string
				var size int
				if r.Float64() < math.Float64frombits(t.tagShare.Load()) {
					i := r.IntN(loadTagKeys)
					key, size = fmt.Sprintf("{%s}:%d", loadTag, i), 200
				} else {
					i := int(z.Uint64())
					key, size = fmt.Sprintf("k:%d", i), valueSize(i)
				}
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				var err error
				if r.IntN(10) == 0 {
					_, err = oc.kv.Put(cctx, []byte(key), []byte(strings.Repeat("v", size)))
				} else {
					_, _, _, err = oc.kv.Get(cctx, []byte(key))
				}
				cancel()
				t.ops.Add(1)
				if err != nil && ctx.Err() == nil {
					t.errs.Add(1)
				}
			}
		}()
	}
	return t
}

func (t *loadTraffic) end() { t.stop(); t.wg.Wait() }

// ratioStats is max and p99 over the active nodes with known load.
type ratioStats struct{ maxB, p99B, maxO, p99O float64 }

func statsOf(vals [][2]float64) ratioStats {
	var b, o []float64
	for _, v := range vals {
		b, o = append(b, v[0]), append(o, v[1])
	}
	slices.Sort(b)
	slices.Sort(o)
	p99 := func(xs []float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		return xs[int(math.Ceil(0.99*float64(len(xs))))-1]
	}
	return ratioStats{slices.Max(b), p99(b), slices.Max(o), p99(o)}
}

func planStats(p *slotdv1.Plan) (before, after ratioStats) {
	var bv, av [][2]float64
	for _, n := range p.GetNodes() {
		if !n.GetLoadKnown() || n.GetTargetSlots() == 0 {
			continue // unknown, or not active
		}
		bv = append(bv, [2]float64{n.GetLoadBefore().GetBytesRatio(), n.GetLoadBefore().GetOpsRatio()})
		av = append(av, [2]float64{n.GetLoadAfter().GetBytesRatio(), n.GetLoadAfter().GetOpsRatio()})
	}
	if len(bv) == 0 {
		return
	}
	return statsOf(bv), statsOf(av)
}

// measured reads the nodes' measured ratios from slotd's load aggregate.
func measured(ctx context.Context, oc *ourCluster) (ratioStats, int, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := slotdv1.NewLoadClient(oc.conn).Get(cctx, &slotdv1.GetLoadRequest{})
	if err != nil {
		return ratioStats{}, 0, err
	}
	var vals [][2]float64
	for _, n := range r.GetNodes() {
		if n.GetKnown() && n.GetFairBytes() > 0 && n.GetFairOps() > 0 {
			vals = append(vals, [2]float64{float64(n.GetBytes()) / n.GetFairBytes(), (n.GetReads_10M() + n.GetWrites_10M()) / n.GetFairOps()})
		}
	}
	if len(vals) == 0 {
		return ratioStats{}, 0, fmt.Errorf("no node with known load")
	}
	return statsOf(vals), len(vals), nil
}

func itemLoad(ctx context.Context, c *config, shm string, w io.Writer) error {
	load := loadavg()
	ps := &procs{dir: c.tmp}
	defer ps.stopAll()
	extraNodeArgs = []string{"--load-report-interval", "1s"}
	defer func() { extraNodeArgs = nil }()
	logf("load: slotd + 4 slotkv (3 in the table), %d keys of %d-%d B", loadKeys, loadMinV, loadMaxV)
	oc, err := startOurs(ctx, ps, c.bin, filepath.Join(shm, "slotd-load"), filepath.Join(shm, "kv-load"), 4, 3, false, "--move-parallelism", "16")
	if err != nil {
		return err
	}
	defer oc.close()
	var total int64
	for i := range loadKeys {
		total += int64(valueSize(i))
	}
	if err := oc.putSized(ctx, loadKeys, 16); err != nil {
		return err
	}
	for i := range loadTagKeys {
		if _, err := oc.kv.Put(ctx, fmt.Appendf(nil, "{%s}:%d", loadTag, i), []byte(strings.Repeat("v", 200))); err != nil {
			return err
		}
	}
	tr := startLoadTraffic(ctx, oc, 0.15)
	defer tr.end()
	logf("load: traffic %d ops/s, Zipf %.1f, tag {%s} 15%%; warming up the ~10 min averages", loadRate, loadZipfS, loadTag)
	if err := warm(ctx, oc, 3, 30*time.Second); err != nil {
		return err
	}
	plan := func(req *slotdv1.PlanRequest) (*slotdv1.Plan, error) {
		req.Operator, req.Reason = "bench", "bench: load item"
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		r, err := oc.admin.Plan(cctx, req)
		return r.GetPlan(), err
	}
	type result struct {
		name   string
		p      *slotdv1.Plan
		b, a   ratioStats
		keysMv int
	}
	var rows []result
	budget := uint64(float64(total) * 0.09)
	for _, pc := range []struct {
		name string
		req  *slotdv1.PlanRequest
	}{
		{"(a) slot count (cheapest slots first; the policy of `redis-cli --cluster rebalance`)", &slotdv1.PlanRequest{BalanceBy: "slots"}},
		{"(b) load-aware, auto, `--tolerance 0.25 --max-bytes 9%`", &slotdv1.PlanRequest{BalanceBy: "auto", Tolerance: 0.25, MaxBytes: budget}},
		{"(b') load-aware, auto, default band (10%), no budget", &slotdv1.PlanRequest{BalanceBy: "auto"}},
	} {
		p, err := plan(pc.req)
		if err != nil {
			return fmt.Errorf("plan %s: %w", pc.name, err)
		}
		b, a := planStats(p)
		rows = append(rows, result{name: pc.name, p: p, b: b, a: a})
		logf("load: %s: %d moves, %d bytes; %s", pc.name, len(p.GetMoves()), p.GetTotalBytes(), p.GetNote())
	}
	// Apply (b) and measure once the moved slots' averages settle a little.
	pb := rows[1].p
	before, _, err := measured(ctx, oc)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = oc.admin.Apply(cctx, &slotdv1.ApplyRequest{PlanId: pb.GetId(), Operator: "bench"})
	cancel()
	if err != nil {
		return err
	}
	if err := oc.waitPlan(ctx, pb.GetId()); err != nil {
		return err
	}
	if err := sleepCtx(ctx, 30*time.Second); err != nil {
		return err
	}
	after, _, err := measured(ctx, oc)
	if err != nil {
		return err
	}
	// Then the tag turns hot: 90% of all requests for a minute. A node's
	// averages are plain means since it started (while younger than the
	// window), so the tag's slot then reads roughly 40% of all requests:
	// more than any node's band (25% x 1.1).
	tr.tagShare.Store(math.Float64bits(0.9))
	if err := sleepCtx(ctx, 60*time.Second); err != nil {
		return err
	}
	hot, err := plan(&slotdv1.PlanRequest{BalanceBy: "auto"})
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "## Load-aware planning\n\n")
	fmt.Fprintf(w, "Load average %s at the start. A real cluster (slotd and four slotkv processes, n4 empty), %d keys of %d B to %d B (%.0f MB), "+
		"%d requests/s (90%% reads) with Zipf s=%.1f popularity over the keys and %d keys under the hash tag {%s} carrying 15%% of requests; "+
		"nodes report load every 1 s and the ratios are the ~10 minute averages slotd keeps. Ratios are load over the node's fair share "+
		"(1 = its share); with 4 nodes the p99 is the maximum. \"As planned\" figures are the planner's, from the same reports; "+
		"(b) was then applied and measured 30 s later: a node's averages are means since it started while it is younger than ~10 min, so slots it received read low for minutes and the measured figures lag the plan's. `cd bench && go run ./cmd/cluster -items load`\n\n",
		load, loadKeys, loadMinV, loadMaxV, float64(total)/1e6, loadRate, loadZipfS, loadTagKeys, loadTag)
	fmt.Fprintln(w, "| plan | max / p99 bytes ratio before -> after | max / p99 ops ratio before -> after | moves | data moved |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s, as planned | %.2f / %.2f -> %.2f / %.2f | %.2f / %.2f -> %.2f / %.2f | %d | %s (%.1f%%) |\n", r.name,
			r.b.maxB, r.b.p99B, r.a.maxB, r.a.p99B, r.b.maxO, r.b.p99O, r.a.maxO, r.a.p99O,
			len(r.p.GetMoves()), mb(r.p.GetTotalBytes()), 100*float64(r.p.GetTotalBytes())/float64(total))
	}
	fmt.Fprintf(w, "| (b) applied, measured | %.2f / %.2f -> %.2f / %.2f | %.2f / %.2f -> %.2f / %.2f | %d | %s |\n\n",
		before.maxB, before.p99B, after.maxB, after.p99B, before.maxO, before.p99O, after.maxO, after.p99O, len(pb.GetMoves()), mb(pb.GetTotalBytes()))
	if hs := hot.GetHotSpots(); len(hs) > 0 {
		for _, h := range hs {
			fmt.Fprintf(w, "Then the tag turns hot (90%% of requests for 60 s): the plan names a hot spot: slot %d on %s, %.0f%% of its %s share, tag %s (%d moves: its node's other loaded slots leave; %s).\n",
				h.GetSlot(), h.GetNodeId(), 100*h.GetShare(), h.GetDimension(), h.GetTag(), len(hot.GetMoves()), hot.GetNote())
		}
	} else {
		fmt.Fprintf(w, "Then the tag turns hot (90%% of requests for 60 s): the plan named no hot spot (%d moves; %s).\n", len(hot.GetMoves()), hot.GetNote())
	}
	fmt.Fprintf(w, "\nClient requests: %d, errors %d.\n\n", tr.ops.Load(), tr.errs.Load())
	return nil
}

func mb(n uint64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// warm waits until n nodes report traffic, then d more for the averages.
func warm(ctx context.Context, oc *ourCluster, n int, d time.Duration) error {
	if err := poll(ctx, 60*time.Second, time.Second, "load reports", func() error {
		_, k, err := measured(ctx, oc)
		if err == nil && k < n {
			err = fmt.Errorf("%d of %d nodes report", k, n)
		}
		return err
	}); err != nil {
		return err
	}
	return sleepCtx(ctx, d)
}

// putSized writes k:i with valueSize(i) bytes for i in [0,n), conc at once.
func (c *ourCluster) putSized(ctx context.Context, n, conc int) error {
	var wg sync.WaitGroup
	next := make(chan int, 1024)
	var firstErr atomic.Value
	go func() {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if _, err := c.kv.Put(ctx, fmt.Appendf(nil, "k:%d", i), []byte(strings.Repeat("v", valueSize(i)))); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	return nil
}
