package mover

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"math"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slots"
)

// benchCluster is a two-node cluster with an executor that is not running
// (the benchmarks drive moves directly, one at a time, as the plan loop does).
func benchCluster(b *testing.B) (*cluster, *Executor) {
	c := newClusterTB(b, 2)
	e, err := NewExecutor(ExecutorConfig{Directory: c.dir, Control: c.ctl, Etcd: c.etcd.Client(), Stores: c.pool, Name: "bench", Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	e.throttle.Store(0) // unlimited unless a benchmark sets it
	return c, e
}

// moveOnce runs one move of slot from n1 to n2 end to end (begin, copy,
// catch-up, fence, drain, commit) and returns its duration and the
// cutover pause (fence to commit). The stores' clients come from the
// watched table, as the executor's do (a running move reads no table
// either); the source's export starts alongside the begin, as in
// runningMove.run.
func moveOnce(b *testing.B, c *cluster, e *Executor, slot slots.Slot) (total, cutover time.Duration, res transferResult) {
	ctx, from, to := c.ctx, "n1", "n2"
	src, dst, err := e.endpoints(c.m.snap.Load(), from, to)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	id := "bench-" + strconv.FormatInt(start.UnixNano(), 36)
	early, stopEarly := startEarlyExport(ctx, src.c, &slotdv1.ExportRequest{Slot: uint32(slot.Int()), MoveId: id, RateBytesPerSecond: wireRate(e.rate(ctx))})
	defer stopEarly()
	mv, err := c.dir.BeginMove(ctx, directory.MoveSpec{Slot: slot, From: from, To: to, MoveID: id, By: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	src.c = early
	var fencing atomic.Bool
	var fencedAt time.Time
	j := &moveJournal{e: e, mv: *mv, prog: &MoveProgress{}, fencing: &fencing}
	tr := &slotTransfer{Slot: slot, MoveID: mv.MoveID, Source: src.c, Target: dst.c, Rate: e.rate(ctx), Journal: j,
		Fresh: true, Fenced: func() { fencedAt = time.Now() }}
	res, err = tr.Run(ctx, stepCopy)
	if err != nil {
		b.Fatal(err)
	}
	total = time.Since(start)
	(&runningMove{e: e, mv: *mv, src: src}).committed(res)
	return total, j.committedAt.Sub(fencedAt), res
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// BenchmarkEmptySlotMove measures the per-slot control overhead: a move
// of a slot holding no data, end to end, with its etcd transactions and
// RPCs. Reports p50/p99 of the move and of the cutover pause.
func BenchmarkEmptySlotMove(b *testing.B) {
	c, e := benchCluster(b)
	snap, _ := c.dir.Snapshot(c.ctx)
	mine := snap.SlotsOf("n1")
	var todo []slots.Slot
	for s := range mine.All() {
		todo = append(todo, s)
	}
	var totals, cutovers []time.Duration
	i := 0
	for b.Loop() {
		if i >= len(todo) {
			b.Fatal("out of slots")
		}
		tot, cut, _ := moveOnce(b, c, e, todo[i])
		totals = append(totals, tot)
		cutovers = append(cutovers, cut)
		i++
	}
	b.ReportMetric(float64(quantile(totals, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(quantile(totals, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(quantile(cutovers, 0.5).Microseconds())/1000, "cutover-p50-ms")
	b.ReportMetric(float64(quantile(cutovers, 0.99).Microseconds())/1000, "cutover-p99-ms")
}

// fillSlot writes n keys of size bytes into slot on node kn directly
// through its engine (a load, not client writes).
func fillSlot(b *testing.B, kn *kvNode, slot slots.Slot, n, size int) {
	val := make([]byte, size)
	batch := make([]node.Mutation, 0, 1000)
	keys := keysInSlots(map[int]bool{slot.Int(): true}, n)
	for i, k := range keys {
		batch = append(batch, node.Mutation{Key: k, Value: val})
		if len(batch) == cap(batch) || i == len(keys)-1 {
			if err := kn.srv.Engine().Apply(context.Background(), slot, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// BenchmarkMoveThroughput moves one full slot unthrottled and reports
// MB/s and keys/s (stores without fsync; SLOTD_BENCH_SYNC=1 for durable
// ones).
func BenchmarkMoveThroughput(b *testing.B) {
	for _, tc := range []struct {
		name       string
		keys, size int
	}{{"100000x100B", 100_000, 100}, {"20000x1KiB", 20_000, 1024}} {
		b.Run(tc.name, func(b *testing.B) {
			c, e := benchCluster(b)
			snap, _ := c.dir.Snapshot(c.ctx)
			mine := snap.SlotsOf("n1")
			next, stop := iter.Pull(mine.All())
			defer stop()
			var secs, bytes, keys float64
			var cut []time.Duration
			var cpu time.Duration
			for b.Loop() {
				// A fresh full slot each time, so no copy is being dropped.
				slot, ok := next()
				if !ok {
					b.Fatal("out of slots")
				}
				b.StopTimer()
				fillSlot(b, c.nodes["n1"], slot, tc.keys, tc.size)
				b.StartTimer()
				cpu0 := processCPU()
				tot, cu, res := moveOnce(b, c, e, slot)
				cpu += processCPU() - cpu0
				secs += tot.Seconds()
				bytes += float64(res.Bytes)
				keys += float64(res.Keys)
				cut = append(cut, cu)
			}
			b.ReportMetric(bytes/secs/1e6, "MB/s")
			// CPU of the whole process (source, mover and target) per move:
			// steadier than the wall time on a shared machine, and what
			// bounds a move when the three are separate processes.
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(keys/secs, "keys/s")
			b.ReportMetric(float64(quantile(cut, 0.5).Microseconds())/1000, "cutover-p50-ms")
		})
	}
}

// BenchmarkRebalance3to4 is a whole rebalance onto a new node: 100,000
// keys of 100 bytes over three nodes, a writer running, a fourth node added and
// the full plan applied at the default (a window of DefaultParallelism,
// one slot holding data per donor: every slot here is near-empty), one
// move at a time, and at 4 to 64 in flight. It fails on a lost write, on
// counts off target or on more moves than the minimum, and reports the
// cutover pause quantiles (upper bounds of the histogram buckets).
func BenchmarkRebalance3to4(b *testing.B) {
	for _, par := range []int{0, 1, 4, 8, 16, 64} {
		b.Run(parName(par), func(b *testing.B) { benchRebalance3to4(b, par) })
	}
}

func benchRebalance3to4(b *testing.B, parallelism int) {
	for b.Loop() {
		c := newClusterTB(b, 3)
		e, _ := c.startExecutorWith("bench", func(cfg *ExecutorConfig) { cfg.Parallelism = parallelism })
		if err := c.ctl.SetThrottle(c.ctx, 0, "bench"); err != nil {
			b.Fatal(err)
		}
		snap, _ := c.dir.Snapshot(c.ctx)
		// Load 100,000 keys straight into their owners' engines.
		bySlot := map[slots.Slot][]node.Mutation{}
		val := make([]byte, 100)
		for i := range 100_000 {
			k := fmt.Appendf(nil, "user:%d", i)
			s := slots.ForKey(k)
			bySlot[s] = append(bySlot[s], node.Mutation{Key: k, Value: val})
		}
		for s, muts := range bySlot {
			if err := c.nodes[snap.Owner(s)].srv.Engine().Apply(c.ctx, s, muts); err != nil {
				b.Fatal(err)
			}
		}
		c.addNode("n4")
		p, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Add: []NodeSpec{{ID: "n4"}}}, Operator: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		minimum := 0
		for _, n := range p.Nodes {
			minimum += max(0, n.SlotsBefore-n.SlotsAfter)
		}
		if len(p.Moves) != minimum {
			b.Fatalf("%d moves, minimum %d", len(p.Moves), minimum)
		}
		var keys [][]byte
		for i := 0; i < 100_000; i += 200 {
			keys = append(keys, fmt.Appendf(nil, "user:%d", i))
		}
		w := startWriterAt(c, keys, 500)
		start := time.Now()
		if _, err := c.ctl.Apply(c.ctx, p.ID, "bench"); err != nil {
			b.Fatal(err)
		}
		// The record's state alone: Get reads every move's result, and
		// reading 4,096 of them every 5 ms would load the machine the
		// benchmark measures.
		waitfor.Err(c.t, 10*time.Minute, "plan done", func() error {
			rec, err := c.ctl.record(c.ctx, p.ID)
			if err != nil {
				return err
			}
			if rec.State != StateDone {
				return fmt.Errorf("plan is %s", rec.State)
			}
			return nil
		})
		elapsed := time.Since(start)
		done, err := c.ctl.Get(c.ctx, p.ID)
		if err != nil {
			b.Fatal(err)
		}
		close(w.stop)
		w.wg.Wait()
		if w.err != nil {
			b.Fatalf("writer: %v", w.err)
		}
		for k, v := range w.acked {
			got, err := c.get([]byte(k))
			if err != nil || !bytes.Equal(got, v) {
				b.Fatalf("lost write %q: got %q (%v), acknowledged %q", k, got, err, v)
			}
		}
		after, _ := c.dir.Snapshot(c.ctx)
		for _, n := range p.Nodes {
			if got := after.Counts()[n.ID]; got != n.SlotsAfter {
				b.Fatalf("node %s owns %d slots, target %d", n.ID, got, n.SlotsAfter)
			}
		}
		if pr := done.Progress(); pr.Done+pr.Skipped != len(p.Moves) {
			b.Fatalf("plan done with %+v of %d moves", pr, len(p.Moves))
		}
		b.ReportMetric(float64(len(p.Moves)), "moves")
		b.ReportMetric(elapsed.Seconds(), "plan-s")
		b.ReportMetric(float64(w.n), "acked-writes")
		b.ReportMetric(histQuantile(b, e.m.cutover, 0.5)*1000, "cutover-p50-ms")
		b.ReportMetric(histQuantile(b, e.m.cutover, 0.99)*1000, "cutover-p99-ms")
	}
}

// histQuantile returns the upper bound of the bucket holding quantile q.
func histQuantile(b *testing.B, h prometheus.Histogram, q float64) float64 {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		b.Fatal(err)
	}
	total := float64(m.GetHistogram().GetSampleCount())
	for _, bk := range m.GetHistogram().GetBucket() {
		if float64(bk.GetCumulativeCount()) >= q*total {
			return bk.GetUpperBound()
		}
	}
	return math.Inf(1)
}

// stalledMove says where a move that did not end stands: its plan, the
// directory's move of slot s, and every goroutine's stack.
func stalledMove(c *cluster, planID string, s slots.Slot) string {
	var b strings.Builder
	if p, err := c.ctl.Get(c.ctx, planID); err != nil {
		fmt.Fprintf(&b, "plan %s: %v; ", planID, err)
	} else {
		fmt.Fprintf(&b, "plan %s %s (%+v); ", planID, p.State, p.Moves)
	}
	if snap, err := c.dir.Snapshot(c.ctx); err != nil {
		fmt.Fprintf(&b, "directory: %v; ", err)
	} else {
		mv, ok := snap.Move(s)
		fmt.Fprintf(&b, "directory at %d: owner %s, move %+v (%v)\n", snap.Version, snap.Owner(s), mv, ok)
	}
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}

// BenchmarkOperatorMove measures what `slotctl move SLOT --to ID` costs end
// to end inside slotd: Control.MoveSlot (a one-move plan stored and
// applied) until the directory shows the new owner, with the elected
// executor picking the plan up from its watch. Empty slots.
func BenchmarkOperatorMove(b *testing.B) {
	c := newClusterTB(b, 2)
	c.startExecutorWith("bench", func(cfg *ExecutorConfig) { cfg.Verify = false })
	if err := c.ctl.SetThrottle(c.ctx, 0, "bench"); err != nil {
		b.Fatal(err)
	}
	snap, _ := c.dir.Snapshot(c.ctx)
	mine := snap.SlotsOf("n1")
	var todo []slots.Slot
	for s := range mine.All() {
		todo = append(todo, s)
	}
	changed := make(chan *directory.Snapshot, 64)
	stop := c.watchTable(snap.Version, func(ctx context.Context, s *directory.Snapshot) {
		select {
		case changed <- s:
		case <-ctx.Done():
		}
	})
	defer stop()
	var totals, applied, begun []time.Duration
	i := 0
	for b.Loop() {
		s := todo[i]
		i++
		start := time.Now()
		p, err := c.ctl.MoveSlot(c.ctx, s.Int(), "n2", "bench", "bench")
		if err != nil {
			b.Fatal(err)
		}
		applied = append(applied, time.Since(start))
		var tBegun time.Duration
		for seen := false; !seen; {
			select {
			case snap := <-changed:
				if _, ok := snap.Move(s); ok && tBegun == 0 {
					tBegun = time.Since(start)
					begun = append(begun, tBegun)
				}
				seen = snap.Owner(s) == "n2"
			case <-time.After(time.Minute):
				b.Fatalf("slot %d never moved: %s", s.Int(), stalledMove(c, p.ID, s))
			}
		}
		totals = append(totals, time.Since(start))
		c.waitPlan(p.ID, StateDone)
	}
	b.ReportMetric(float64(quantile(totals, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(quantile(totals, 0.99).Microseconds())/1000, "p99-ms")
	// Where it goes: the plan stored, the move begun (seen by a watcher).
	b.ReportMetric(float64(quantile(applied, 0.5).Microseconds())/1000, "stored-p50-ms")
	if len(begun) > 0 {
		b.ReportMetric(float64(quantile(begun, 0.5).Microseconds())/1000, "begun-p50-ms")
	}
}
