package service

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
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
			eventually(b, "hub has the map", func() bool { return srv.svc.Hub().Current() != nil })
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
// moves 50 slots one after another through the directory, and reports the
// delay from the start of each move's commit (the etcd transaction
// included) to the last client holding the committed version: p50 and p99
// over the 50 commits. Each move's begin and fence versions reach every
// client before its commit starts, so the commit is measured alone. Run
// with -benchtime=1x: one iteration is the whole experiment.
func BenchmarkPropagation1000(b *testing.B) {
	const clients, changes = 1000, 50
	for b.Loop() {
		d := newDir(b, etcdtest.New(b))
		bootstrap(b, d)
		srv := startServer(b, d, "127.0.0.1:0", nil)

		// want is the version being waited for; the client that brings the
		// count of clients holding it to 1,000 reports the time.
		var want atomic.Uint64
		var have atomic.Int32
		done := make(chan time.Time, 1)
		var wg sync.WaitGroup
		cs := make([]*client.Client, clients)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for i := range cs {
			c, err := client.New(ctx, client.Options{Endpoints: []string{srv.addr()}})
			if err != nil {
				b.Fatal(err)
			}
			cs[i] = c
			maps, unsub := c.Subscribe()
			defer unsub()
			wg.Add(1)
			go func() {
				defer wg.Done()
				counted := uint64(0) // the target this client was counted for
				for m := range maps {
					if w := want.Load(); w != 0 && m.Version() >= w && counted != w {
						counted = w
						if have.Add(1) == clients {
							done <- time.Now()
						}
					}
				}
			}()
		}
		cancel()
		eventually(b, "every client watches", func() bool {
			return testutil.ToFloat64(srv.svc.dir.m.watchers) == clients
		})

		delays := make([]time.Duration, 0, changes)
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
			// The commit's version is the next one: wait for it before it exists.
			cur, err := d.Version(tctx)
			if err != nil {
				b.Fatal(err)
			}
			want.Store(cur + 1)
			start := time.Now()
			v, err := d.CommitMove(tctx, s, mv.MoveID, "bench")
			if err != nil || v != cur+1 {
				b.Fatalf("commit: version %d, %v; want %d", v, err, cur+1)
			}
			select {
			case t := <-done:
				delays = append(delays, t.Sub(start))
			case <-time.After(30 * time.Second):
				b.Fatalf("change %d: only %d of %d clients saw version %d", i, have.Load(), clients, v)
			}
		}
		slices.Sort(delays)
		b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "p99-ms")

		for _, c := range cs {
			c.Close()
		}
		wg.Wait()
		srv.stop()
	}
}
