package grpcapi

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/internal/gcpercent"
	"github.com/slotd/slotd/slots"
)

// BenchmarkGetMap fetches the full map over gRPC from a service on a real
// etcd, with 3 and 200 nodes, and reports its encoded size.
func BenchmarkGetMap(b *testing.B) {
	for _, nodes := range []int{3, 200} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			d := newDir(b, etcdtest.New(b))
			// Registered first: a bootstrap that also registers 200 nodes
			// exceeds etcd's 128 operations per transaction.
			for i := range nodes {
				n := directory.Node{ID: fmt.Sprintf("n%03d", i), Addr: fmt.Sprintf("10.0.%d.%d:7000", i/250, i%250+1), Weight: 1}
				if _, err := d.RegisterNode(testCtx(b), n); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := d.Bootstrap(testCtx(b), nil, 0, "bench"); err != nil {
				b.Fatal(err)
			}
			srv := startServer(b, d, "127.0.0.1:0", nil)
			eventually(b, "hub has the map", func() bool { return srv.svc.hub.Current() != nil })
			dc := slotdv1.NewDirectoryClient(dial(b, srv.addr()))
			ctx := testCtx(b)
			var size int
			for b.Loop() {
				resp, err := dc.GetMap(ctx, &slotdv1.GetMapRequest{})
				if err != nil {
					b.Fatal(err)
				}
				size = proto.Size(resp)
			}
			b.ReportMetric(float64(size), "map-bytes")
		})
	}
}

// BenchmarkPropagation1000 runs 1,000 SDK clients in this process, each with
// its own connection and WatchMap stream to one service over a real etcd,
// moves 200 slots one after another through the directory, and reports the
// delay from the start of each move's commit (the etcd transaction
// included) to the last client holding the committed version: p50, p99 and
// the slowest over the 200 commits (over 50, as this benchmark once ran, a
// p99 is the slowest commit: one collection that overlaps a commit decides
// it; over 200, two commits are slower than the p99). Each
// move's begin and fence versions reach every client before its commit
// starts, so the commit is measured alone. Run with -benchtime=1x: one
// iteration is the whole experiment.
//
// What is slotd and what is the harness: send-p50-ms and send-p99-ms are
// the delay to the last of the 1,000 streams' Send of the commit returning
// (slotd's part: the etcd watch, the hub, the fan-out; a returned Send is
// queued for gRPC's writer, which then writes each connection's socket).
// The rest is the 1,000 SDK clients, which a deployment runs in 1,000
// processes, here sharing this one's two cores and heap with slotd, and the
// one goroutine per client that counts it. cpu-ms/commit is this process's
// CPU (user and system) from a commit's start to its last client: under
// other load it moves less than the delays do. The process runs with the
// collector target slotd runs with (internal/gcpercent, as cmd/slotd
// sets it; GOGC in the environment wins): with 1,000 clients in one heap,
// each then copying its 32 KiB owner table per commit, Go's default
// collected every three commits, where each client in its own process
// would hardly ever. (A client now copies its Map, 448 bytes, per version,
// 256 bytes of recent owners per committed move, and the 32 KiB array
// about once in 10-128 moves: api/slotmap BenchmarkApplyMoves; its watch
// decoder allocates nothing for a delta that names known nodes.)
func BenchmarkPropagation1000(b *testing.B) {
	const clients, changes = 1000, 200
	slotdGC(b)
	for b.Loop() {
		d := newDir(b, etcdtest.New(b))
		bootstrap(b, d)
		// want is the version being waited for; the stream whose Send
		// brings the count of streams that sent it to 1,000, and the client
		// that brings the count of clients holding it to 1,000, report the
		// time.
		var want atomic.Uint64
		var sent, have atomic.Int32
		sentAll, done := make(chan time.Time, 1), make(chan time.Time, 1)
		countSends := grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, sendCounter{ServerStream: ss, count: func(v uint64) {
				if w := want.Load(); w != 0 && v == w && sent.Add(1) == clients {
					sentAll <- time.Now()
				}
			}})
		})
		srv := startServer(b, d, "127.0.0.1:0", nil, countSends)

		cs, stopClients := startWatchers(b, srv, clients, func() func(uint64) {
			counted := uint64(0) // the target this client was counted for
			return func(v uint64) {
				if w := want.Load(); w != 0 && v >= w && counted != w {
					counted = w
					if have.Add(1) == clients {
						done <- time.Now()
					}
				}
			}
		})

		delays := make([]time.Duration, 0, changes)
		sends := make([]time.Duration, 0, changes)
		var cpu time.Duration
		var gc0, gc1 runtime.MemStats
		runtime.ReadMemStats(&gc0)
		for i := range changes {
			s := slots.MustNew(1000 + i)
			tctx := testCtx(b)
			snap, err := d.Snapshot(tctx)
			if err != nil {
				b.Fatal(err)
			}
			to := otherThan(b, d, s.Int())
			mv, err := d.BeginMove(tctx, directory.MoveSpec{Slot: s, From: snap.Owner(s), To: to, Reason: "bench", By: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			adv, err := d.AdvanceMove(tctx, s, mv.MoveID, directory.PhaseFenced)
			if err != nil {
				b.Fatal(err)
			}
			// Measure the commit alone: let the move's earlier versions
			// reach every client first.
			eventually(b, "every client at the fenced version", func() bool {
				for _, c := range cs {
					if c.Map().Version() < adv {
						return false
					}
				}
				return true
			})
			have.Store(0)
			sent.Store(0)
			// The commit's version is the next one: wait for it before it exists.
			cur, err := d.Version(tctx)
			if err != nil {
				b.Fatal(err)
			}
			want.Store(cur + 1)
			cpu0 := processCPU(b)
			start := time.Now()
			v, err := d.CommitMove(tctx, s, mv.MoveID, "bench")
			if err != nil || v != cur+1 {
				b.Fatalf("commit: version %d, %v; want %d", v, err, cur+1)
			}
			for got := 0; got < 2; got++ {
				select {
				case t := <-sentAll:
					sends = append(sends, t.Sub(start))
				case t := <-done:
					delays = append(delays, t.Sub(start))
					cpu += processCPU(b) - cpu0
				case <-time.After(30 * time.Second):
					b.Fatalf("change %d: %d of %d streams sent version %d, %d clients have it", i, sent.Load(), clients, v, have.Load())
				}
			}
		}
		runtime.ReadMemStats(&gc1)
		slices.Sort(delays)
		slices.Sort(sends)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(delays[len(delays)/2]), "p50-ms")
		b.ReportMetric(ms(delays[len(delays)*99/100]), "p99-ms")
		b.ReportMetric(ms(delays[len(delays)-1]), "max-ms")
		b.ReportMetric(ms(sends[len(sends)/2]), "send-p50-ms")
		b.ReportMetric(ms(sends[len(sends)*99/100]), "send-p99-ms")
		b.ReportMetric(ms(cpu)/changes, "cpu-ms/commit")
		// Collections during the moves: each takes CPU from the commits it
		// overlaps, which is what p99 and the slowest show.
		b.ReportMetric(float64(gc1.NumGC-gc0.NumGC), "gc-cycles")
		// What the process allocated per move (three versions: begin,
		// fence, commit), the eventual waits between them included: what
		// makes the collections.
		b.ReportMetric(float64(gc1.TotalAlloc-gc0.TotalAlloc)/changes/1e6, "alloc-MB/move")

		stopClients()
		srv.stop()
	}
}

// slotdGC sets the collector target slotd runs with (internal/gcpercent)
// until b ends.
func slotdGC(b *testing.B) {
	prev := debug.SetGCPercent(100) // reads the target in force
	debug.SetGCPercent(prev)
	b.Cleanup(func() { debug.SetGCPercent(prev) })
	gcpercent.Apply()
}

// startWatchers starts n SDK clients of srv, each with its own connection
// and WatchMap stream, and waits until every stream is open. Each client
// has a goroutine of its own that calls the function newCount made for it
// with the version of every map the client publishes. stop closes the
// clients and waits for those goroutines.
func startWatchers(b *testing.B, srv *server, n int, newCount func() func(version uint64)) (cs []*client.Client, stop func()) {
	var wg sync.WaitGroup
	cs = make([]*client.Client, n)
	unsubs := make([]func(), n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range cs {
		c, err := client.New(ctx, client.Options{Endpoints: []string{srv.addr()}})
		if err != nil {
			b.Fatal(err)
		}
		cs[i] = c
		maps, unsub := c.Subscribe()
		unsubs[i] = unsub
		count := newCount()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range maps {
				count(m.Version())
			}
		}()
	}
	eventually(b, "every client watches", func() bool {
		return testutil.ToFloat64(srv.svc.dir.m.watchers) == float64(n)
	})
	return cs, func() {
		for i, c := range cs {
			unsubs[i]()
			c.Close()
		}
		wg.Wait()
	}
}

// BenchmarkPropagationBurst: 1,000 SDK clients in this process, as in
// BenchmarkPropagation1000, follow a burst of moves written back to back,
// as a rebalance at slotd's defaults writes them (100 moves, each its
// begin, fence and commit: 300 versions, as fast as etcd takes them).
// Reported: converge-ms, from the last commit's start to the last client
// holding it; burst-ms, how long writing the burst took; msgs/client, the
// watch messages each stream sent for the burst (one a version when no
// stream falls behind); cpu-ms, this process's CPU from the burst's start
// to the last client. Run with -benchtime=1x.
func BenchmarkPropagationBurst(b *testing.B) {
	const clients, moves = 1000, 100
	slotdGC(b)
	for b.Loop() {
		d := newDir(b, etcdtest.New(b))
		bootstrap(b, d)
		var want atomic.Uint64
		var have atomic.Int32
		var msgs atomic.Int64
		done := make(chan time.Time, 1)
		countSends := grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, sendCounter{ServerStream: ss, count: func(uint64) { msgs.Add(1) }})
		})
		srv := startServer(b, d, "127.0.0.1:0", nil, countSends)
		_, stopClients := startWatchers(b, srv, clients, func() func(uint64) {
			counted := false
			return func(v uint64) {
				if w := want.Load(); w != 0 && v >= w && !counted {
					counted = true
					if have.Add(1) == clients {
						done <- time.Now()
					}
				}
			}
		})
		tctx := testCtx(b)
		snap, err := d.Snapshot(tctx)
		if err != nil {
			b.Fatal(err)
		}
		// Targets first: otherThan reads the directory, which the burst
		// must not wait for.
		tos := make([]string, moves)
		for i := range tos {
			tos[i] = otherThan(b, d, 1000+i)
		}
		msgs.Store(0)
		cpu0 := processCPU(b)
		start := time.Now()
		var last time.Time
		var v uint64
		for i := range moves {
			s := slots.MustNew(1000 + i)
			mv, err := d.BeginMove(tctx, directory.MoveSpec{Slot: s, From: snap.Owner(s), To: tos[i], Reason: "bench", By: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := d.AdvanceMove(tctx, s, mv.MoveID, directory.PhaseFenced); err != nil {
				b.Fatal(err)
			}
			if i == moves-1 {
				cur, err := d.Version(tctx)
				if err != nil {
					b.Fatal(err)
				}
				want.Store(cur + 1)
				last = time.Now()
			}
			if v, err = d.CommitMove(tctx, s, mv.MoveID, "bench"); err != nil {
				b.Fatal(err)
			}
		}
		if v != want.Load() {
			b.Fatalf("last commit at version %d; want %d", v, want.Load())
		}
		burst := time.Since(start)
		var end time.Time
		select {
		case end = <-done:
		case <-time.After(time.Minute):
			b.Fatalf("%d of %d clients have version %d after a minute", have.Load(), clients, v)
		}
		cpu := processCPU(b) - cpu0
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(end.Sub(last)), "converge-ms")
		b.ReportMetric(ms(burst), "burst-ms")
		b.ReportMetric(float64(msgs.Load())/clients, "msgs/client")
		b.ReportMetric(ms(cpu), "cpu-ms")
		stopClients()
		srv.stop()
	}
}

// sendCounter calls count with the version of every map update the stream
// sends, once Send returned.
type sendCounter struct {
	grpc.ServerStream
	count func(version uint64)
}

func (s sendCounter) SendMsg(m any) error {
	if err := s.ServerStream.SendMsg(m); err != nil {
		return err
	}
	if e, ok := m.(*encoded); ok {
		if r, ok := e.msg.(*slotdv1.WatchMapResponse); ok {
			s.count(max(r.GetDelta().GetVersion(), r.GetFull().GetVersion()))
		}
	}
	return nil
}

// processCPU returns the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
