package slotkv

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slots"
)

// benchClients is the number of concurrent callers in the Put/Get benchmarks.
const benchClients = 8

// runOps runs b.N calls of op split over benchClients goroutines and
// reports ops/s and the 99th-percentile latency.
func runOps(b *testing.B, op func(ctx context.Context, i int) error) {
	ctx := context.Background()
	lat := make([][]time.Duration, benchClients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < b.N; i += benchClients {
				t0 := time.Now()
				if err := op(ctx, i); err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "ops/s")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99_ms")
	}
}

// BenchmarkPut: gRPC Put of 100-byte values to one node over 127.0.0.1, 8
// concurrent clients, with and without fsync at each commit.
func BenchmarkPut(b *testing.B) {
	for _, fsync := range []bool{true, false} {
		b.Run(fmt.Sprintf("fsync=%v", fsync), func(b *testing.B) {
			m := new(node.StaticMap)
			tn := startNode(b, "a", b.TempDir(), m, nodeOpts{noSync: !fsync})
			m.SetAll("a", tn.addr)
			val := make([]byte, 100)
			runOps(b, func(ctx context.Context, i int) error {
				_, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: fmt.Appendf(nil, "key-%d", i%10000), Value: val})
				return err
			})
		})
	}
}

// BenchmarkGet: gRPC Get of 10,000 existing 100-byte values, 8 concurrent
// clients.
func BenchmarkGet(b *testing.B) {
	m := new(node.StaticMap)
	tn := startNode(b, "a", b.TempDir(), m, nodeOpts{noSync: true})
	m.SetAll("a", tn.addr)
	val := make([]byte, 100)
	for i := range 10000 {
		k := fmt.Appendf(nil, "key-%d", i)
		if err := tn.srv.Engine().Apply(context.Background(), slots.ForKey(k), []node.Mutation{{Key: k, Value: EncodeValue(1, val)}}); err != nil {
			b.Fatal(err)
		}
	}
	runOps(b, func(ctx context.Context, i int) error {
		r, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: fmt.Appendf(nil, "key-%d", i%10000)})
		if err == nil && !r.Found {
			err = fmt.Errorf("key-%d not found", i%10000)
		}
		return err
	})
}

// fillSlot writes n keys with values of size bytes (version included) into
// one slot, directly through the engine.
func fillSlot(b *testing.B, e *Engine, tag string, n, size int) slots.Slot {
	keys, s := keysIn(tag, n)
	val := EncodeValue(1, make([]byte, size-8))
	for i := 0; i < n; i += 5000 {
		batch := make([]node.Mutation, 0, 5000)
		for _, k := range keys[i:min(i+5000, n)] {
			batch = append(batch, node.Mutation{Key: k, Value: val})
		}
		if err := e.Apply(context.Background(), s, batch); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkExport: an unthrottled Export stream of one whole slot over
// 127.0.0.1; MB/s counts key and value bytes.
func BenchmarkExport(b *testing.B) {
	for _, tc := range []struct {
		name    string
		n, size int
	}{
		{"100000x100B", 100000, 100},
		{"20000x1KiB", 20000, 1024},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := new(node.StaticMap)
			tn := startNode(b, "a", b.TempDir(), m, nodeOpts{noSync: true})
			m.SetAll("a", tn.addr)
			s := fillSlot(b, tn.srv.Engine(), "export", tc.n, tc.size)
			_, total, err := tn.srv.Engine().SlotSize(context.Background(), s)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(total)
			b.ResetTimer()
			for i := range b.N {
				batches := exportAll(context.Background(), b, tn, s, fmt.Sprint("bench-", i), nil, 0)
				if !batches[len(batches)-1].Done {
					b.Fatal("export did not finish")
				}
			}
		})
	}
}

// BenchmarkImport: one slot's export batches (1 MiB each, the default)
// imported into a target over 127.0.0.1 into a store that fsyncs every
// commit (durable) or not: one call after another, or pipelined as the
// mover sends them to a target that waits for a batch sent ahead (two
// calls in flight, the second marked after_previous). MB/s counts key and
// value bytes; the time runs from the first Import to the return of the
// last, which is when every batch is in the store. The target's copy of
// the slot is deleted between iterations, outside the timer.
func BenchmarkImport(b *testing.B) {
	for _, tc := range []struct {
		name      string
		n, size   int
		noSync    bool
		pipelined bool
	}{
		{"100000x100B/durable", 100000, 100, false, false},
		{"20000x1KiB/durable", 20000, 1024, false, false},
		{"20000x1KiB/durable/pipelined", 20000, 1024, false, true},
		{"20000x1KiB/nosync", 20000, 1024, true, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			m := new(node.StaticMap)
			src := startNode(b, "a", b.TempDir(), m, nodeOpts{noSync: true})
			dst := startNode(b, "b", b.TempDir(), m, nodeOpts{noSync: tc.noSync})
			m.SetAll("a", src.addr) // b owns nothing: it takes imports
			s := fillSlot(b, src.srv.Engine(), "import", tc.n, tc.size)
			_, total, err := src.srv.Engine().SlotSize(ctx, s)
			if err != nil {
				b.Fatal(err)
			}
			batches := exportAll(ctx, b, src, s, "bench-export", nil, 0)
			b.SetBytes(total)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				for done := false; !done; {
					if done, err = dst.srv.Engine().DeleteSlot(ctx, s, 10_000); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if tc.pipelined {
					importPipelined(ctx, b, dst, s, fmt.Sprint("bench-", i), batches)
				} else {
					importBatches(ctx, b, dst, s, fmt.Sprint("bench-", i), batches, 1)
				}
			}
			b.StopTimer()
			if keys, _, _ := dst.srv.Engine().SlotSize(ctx, s); keys != int64(tc.n) {
				b.Fatalf("target holds %d keys, want %d", keys, tc.n)
			}
		})
	}
}

// BenchmarkExportThrottled exports 20 MB at 2 MB/s over a real socket and
// reports the average rate and the worst 1-second window after the first,
// as a percentage off the limit (the claim: within 10%).
func BenchmarkExportThrottled(b *testing.B) {
	const limit = 2_000_000
	m := new(node.StaticMap)
	tn := startNode(b, "a", b.TempDir(), m, nodeOpts{noSync: true})
	m.SetAll("a", tn.addr)
	s := fillSlot(b, tn.srv.Engine(), "throttled", 20000, 1000) // 20 MB
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if _, err := tn.store.SetExportRate(ctx, &slotdv1.SetExportRateRequest{BytesPerSecond: limit}); err != nil {
			b.Fatal(err)
		}
		st, err := tn.store.Export(ctx, &slotdv1.ExportRequest{Slot: uint32(s.Int()), MoveId: fmt.Sprint("t-", i), MaxBatchBytes: 64 << 10})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var windows []float64
		var total float64
		for {
			bt, err := st.Recv()
			if err != nil {
				b.Fatal(err)
			}
			w := int(time.Since(start) / time.Second)
			for len(windows) <= w {
				windows = append(windows, 0)
			}
			for _, e := range bt.Entries {
				windows[w] += float64(len(e.Key) + len(e.Value))
				total += float64(len(e.Key) + len(e.Value))
			}
			if bt.Done {
				break
			}
		}
		elapsed := time.Since(start).Seconds()
		worst := 0.0
		for _, w := range windows[1 : len(windows)-1] {
			worst = max(worst, 100*abs(w-limit)/limit)
		}
		b.ReportMetric(total/elapsed/1e6, "MB/s")
		b.ReportMetric(worst, "worst_window_off_%")
	}
	if _, err := tn.store.SetExportRate(ctx, &slotdv1.SetExportRateRequest{}); err != nil {
		b.Fatal(err)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// BenchmarkSlotSizes: one pass over a data file of 100,000 keys of 100-byte
// values (what node.Load's size pass costs the demo's store; the node waits
// 20 times this between passes, at least 2 s).
func BenchmarkSlotSizes(b *testing.B) {
	e, err := OpenEngine(b.TempDir()+"/slotkv.db", EngineOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	fill100k(b, e)
	b.ResetTimer()
	for b.Loop() {
		n := 0
		if err := e.SlotSizes(ctx, func(slots.Slot, int64, int64) { n++ }); err != nil {
			b.Fatal(err)
		}
	}
}

// fill100k writes 100,000 keys of 100-byte values into e and returns how
// many slots hold them.
func fill100k(b *testing.B, e *Engine) int {
	val := EncodeValue(1, make([]byte, 100))
	bySlot := map[slots.Slot][]node.Mutation{}
	for i := range 100000 {
		k := fmt.Appendf(nil, "key:%d", i)
		bySlot[slots.ForKey(k)] = append(bySlot[slots.ForKey(k)], node.Mutation{Key: k, Value: val})
	}
	for s, batch := range bySlot {
		if err := e.Apply(context.Background(), s, batch); err != nil {
			b.Fatal(err)
		}
	}
	return len(bySlot)
}

// BenchmarkSlotStatsAll: a SlotStats call with no slots (what the mover's
// planning asks every donor) on a node of 100,000 keys of 100-byte values:
// "all" is the call, sized in one pass (Node.StatsAll); "per-slot" is what
// it did before, Node.Stats for each of the 16,384 slots, a read
// transaction and a seek each.
func BenchmarkSlotStatsAll(b *testing.B) {
	m := new(node.StaticMap)
	n := startNode(b, "a", b.TempDir(), m, nodeOpts{noSync: true})
	m.SetAll("a", n.addr)
	ctx := context.Background()
	withData := fill100k(b, n.srv.Engine())
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			resp, err := n.store.SlotStats(ctx, &slotdv1.SlotStatsRequest{})
			if err != nil || len(resp.Slots) != withData {
				b.Fatalf("SlotStats: %d slots, %v; want %d", len(resp.GetSlots()), err, withData)
			}
		}
	})
	b.Run("per-slot", func(b *testing.B) {
		for b.Loop() {
			for i := range slots.Count {
				if _, err := n.srv.Node().Stats(ctx, slots.MustNew(i)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// importPipelined forwards export batches to dst, numbered from 1, with
// two imports in flight: batch i+1 is sent (after_previous) while batch i
// is unanswered, and batch i+2 only once batch i is answered.
func importPipelined(ctx context.Context, b *testing.B, dst *testNode, s slots.Slot, moveID string, batches []*slotdv1.ExportBatch) {
	b.Helper()
	answered := make([]chan error, len(batches))
	for i, eb := range batches {
		if i >= 2 {
			if err := <-answered[i-2]; err != nil {
				b.Fatalf("import batch %d: %v", i-1, err)
			}
		}
		answered[i] = make(chan error, 1)
		req := &slotdv1.ImportRequest{Slot: uint32(s.Int()), MoveId: moveID, Batch: &slotdv1.ImportRequest_Snapshot{Snapshot: &slotdv1.SnapshotImport{
			BatchSeq: uint64(i + 1), Entries: eb.Entries, Cursor: eb.Cursor, SnapshotSeq: eb.SnapshotSeq, Done: eb.Done, AfterPrevious: i > 0,
		}}}
		go func() {
			_, err := dst.store.Import(ctx, req)
			answered[i] <- err
		}()
	}
	for i := max(len(batches)-2, 0); i < len(batches); i++ {
		if err := <-answered[i]; err != nil {
			b.Fatalf("import batch %d: %v", i+1, err)
		}
	}
}
