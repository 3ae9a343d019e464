package client

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/internal/maptest"
	"github.com/slotd/slotd/slots"
)

// BenchmarkRoute measures the hot path applications call per request.
// Target: <= 20 ns/op and 0 allocs for a 16-byte key.
func BenchmarkRoute(b *testing.B) {
	st := maptest.NewState(baseMap(b, 1))
	srv := startServer(b, st, "127.0.0.1:0")
	defer srv.Stop()
	c := newClient(b, nil, srv.Addr())
	key := []byte("user:0123456789a") // 16 bytes
	skey := string(key)

	b.Run("bytes16", func(b *testing.B) {
		b.ReportAllocs()
		var sink slotmap.Route
		for b.Loop() {
			sink, _ = c.Route(key)
		}
		_ = sink
	})
	b.Run("string16", func(b *testing.B) {
		b.ReportAllocs()
		var sink slotmap.Route
		for b.Loop() {
			sink, _ = c.RouteString(skey)
		}
		_ = sink
	})
	// 16,384 distinct 16-byte keys, cycled, as `make bench-compare` does:
	// one key over and over lets the branch predictor learn its slot.
	keys := cycledKeys()
	b.Run("bytes16-cycled-owner", func(b *testing.B) {
		b.ReportAllocs()
		var sink string
		for i := 0; b.Loop(); i++ {
			r, err := c.Route(keys[i&(len(keys)-1)])
			if err != nil {
				b.Fatal(err)
			}
			sink = r.Owner()
		}
		_ = sink
	})
	// The floor of Route's target (within 1.5x of the bare hash):
	// xxhash64 of the same keys in the same loop.
	b.Run("bytes16-cycled-floor-xxhash", func(b *testing.B) {
		b.ReportAllocs()
		var sink uint64
		for i := 0; b.Loop(); i++ {
			sink = xxhash.Sum64(keys[i&(len(keys)-1)])
		}
		_ = sink
	})
	b.Run("bytes16-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var sink slotmap.Route
			for pb.Next() {
				sink, _ = c.Route(key)
			}
			_ = sink
		})
	})
}

// cycledKeys returns 16,384 distinct 16-byte keys.
func cycledKeys() [][]byte {
	keys := make([][]byte, 1<<14)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user:%011d", i*7919)
	}
	return keys
}

// routeKeySets are the keys BenchmarkRouteVsFloor compares Route and the
// floor on: 16 bytes (the target's keys, `user:` and 11 digits) and
// other lengths, inside and outside Route's inline path (8-16 bytes with no
// byte >= '{'), and keys with a hash tag, which take slots.ForKey's scan.
var routeKeySets = []struct {
	name string
	key  func(i int) string
}{
	{"bytes16", func(i int) string { return fmt.Sprintf("user:%011d", i*7919) }},
	{"bytes8", func(i int) string { return fmt.Sprintf("u%07d", i) }},
	{"bytes12", func(i int) string { return fmt.Sprintf("user:%07d", i*409) }},
	{"bytes24", func(i int) string { return fmt.Sprintf("user:%011d:profile", i*7919) }},
	{"bytes32", func(i int) string { return fmt.Sprintf("user:%011d:profile:settings", i*7919) }},
	{"bytes64", func(i int) string {
		return fmt.Sprintf("tenant:acme:user:%011d:profile:settings:notifications:em", i*7919)
	}},
	{"tagged17", func(i int) string { return fmt.Sprintf("{user:%05d}:cart", i) }},
}

// BenchmarkRouteVsFloor measures Route's target (within 1.5x of the bare
// hash) side by side, for each key set of routeKeySets (the target
// is stated for bytes16; the others show what other keys get): each
// iteration times one pass over 16,384 distinct keys with xxhash.Sum64 and
// one with Route then Owner (the same loop shape, alternating which goes
// first) and keeps the ratio of the two, so load on a shared machine lands
// on both sides of it. Reported: the median ratio (route/floor) and the
// median ns per lookup of each; ns/op is that of a whole pair of passes.
func BenchmarkRouteVsFloor(b *testing.B) {
	st := maptest.NewState(baseMap(b, 1))
	srv := startServer(b, st, "127.0.0.1:0")
	defer srv.Stop()
	c := newClient(b, nil, srv.Addr())
	for _, set := range routeKeySets {
		keys := make([][]byte, 1<<14)
		for i := range keys {
			keys[i] = []byte(set.key(i))
		}
		b.Run(set.name, func(b *testing.B) { routeVsFloor(b, c, keys) })
	}
}

func routeVsFloor(b *testing.B, c *Client, keys [][]byte) {
	var sink uint64
	floor := func() float64 {
		start := time.Now()
		var sum uint64
		for i := range keys {
			sum += xxhash.Sum64(keys[i])
		}
		sink += sum
		return float64(time.Since(start).Nanoseconds()) / float64(len(keys))
	}
	route := func() float64 {
		start := time.Now()
		var sum uint64
		for i := range keys {
			r, err := c.Route(keys[i])
			if err != nil {
				b.Fatal(err)
			}
			sum += uint64(len(r.Owner()))
		}
		sink += sum
		return float64(time.Since(start).Nanoseconds()) / float64(len(keys))
	}
	var fs, rs, ratios []float64
	for i := 0; b.Loop(); i++ {
		var f, r float64
		if i%2 == 0 {
			f, r = floor(), route()
		} else {
			r, f = route(), floor()
		}
		fs, rs, ratios = append(fs, f), append(rs, r), append(ratios, r/f)
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(med(ratios), "route/floor")
	b.ReportMetric(med(rs), "route-ns/key")
	b.ReportMetric(med(fs), "floor-ns/key")
	_ = sink
}

// BenchmarkRouteParallel routes with one Client from 1, 2 and 4 goroutines
// at once, each through the cycled keys from its own offset for b.N calls,
// so ns/op is per goroutine: how long one Route takes while the others
// route too. Route writes nothing shared, so with a core per goroutine the
// figure stays at the one-goroutine one; with more goroutines than
// GOMAXPROCS they take turns on the cores and ns/op grows by
// goroutines/GOMAXPROCS while routes/s (all goroutines) stays flat.
func BenchmarkRouteParallel(b *testing.B) {
	st := maptest.NewState(baseMap(b, 1))
	srv := startServer(b, st, "127.0.0.1:0")
	defer srv.Stop()
	c := newClient(b, nil, srv.Addr())
	keys := cycledKeys()
	for _, g := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			b.ReportAllocs()
			// One sink per goroutine, a cache line apart, written once.
			sinks := make([]int, 8*g)
			errs := make(chan error, g)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for j := range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					sink, off := 0, j*4099
					for i := 0; i < b.N; i++ {
						r, err := c.Route(keys[(i+off)&(len(keys)-1)])
						if err != nil {
							errs <- err
							return
						}
						sink += len(r.Owner())
					}
					sinks[8*j] = sink
				}()
			}
			b.ResetTimer()
			close(start)
			wg.Wait()
			b.StopTimer()
			close(errs)
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(g)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mroutes/s")
			b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "gomaxprocs")
		})
	}
}

// BenchmarkFullMapFetch measures GetMap of a full map over a 127.0.0.1
// socket plus decoding, and reports the wire size.
func BenchmarkFullMapFetch(b *testing.B) {
	for _, n := range []int{3, 200} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			nodes := make([]slotmap.Node, n)
			for i := range nodes {
				nodes[i] = slotmap.Node{ID: fmt.Sprintf("store-%03d", i), Addr: fmt.Sprintf("10.0.%d.%d:7500", i/256, i%256), Weight: 1}
			}
			m, err := maptest.RoundRobin(1, nodes)
			if err != nil {
				b.Fatal(err)
			}
			srv := startServer(b, maptest.NewState(m), "127.0.0.1:0")
			defer srv.Stop()
			conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			dir := slotdv1.NewDirectoryClient(conn)
			ctx := context.Background()
			var size int
			b.ReportAllocs()
			for b.Loop() {
				resp, err := dir.GetMap(ctx, &slotdv1.GetMapRequest{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := slotmap.FromProto(resp.GetMap()); err != nil {
					b.Fatal(err)
				}
				size = proto.Size(resp)
			}
			b.ReportMetric(float64(size), "wire-bytes")
		})
	}
}

// BenchmarkPropagation1000 starts 1,000 SDK clients in this process, each
// with its own connection and watch stream, publishes 50 map changes one
// after another, and reports the delay from publishing a change to the last
// client seeing it (p50 and p99 over the 50 changes). Against maptest it
// measures the SDK and gRPC; the same loop against slotd adds etcd.
// Run with -benchtime=1x: one iteration is the whole experiment.
func BenchmarkPropagation1000(b *testing.B) {
	const clients, changes = 1000, 50
	for b.Loop() {
		st := maptest.NewState(baseMap(b, 1))
		srv := startServer(b, st, "127.0.0.1:0")

		// seen[v] counts clients that have seen version v; done[v] gets the
		// time the last one did.
		var seen [changes + 2]atomic.Int32
		var done [changes + 2]chan time.Time
		for i := range done {
			done[i] = make(chan time.Time, 1)
		}
		var wg sync.WaitGroup
		cs := make([]*Client, clients)
		for i := range cs {
			cs[i] = newClient(b, nil, srv.Addr())
			maps, cancel := cs[i].Subscribe()
			defer cancel()
			wg.Add(1)
			go func() {
				defer wg.Done()
				var last uint64
				for m := range maps {
					for v := last + 1; v <= m.Version() && v < uint64(len(seen)); v++ {
						if seen[v].Add(1) == clients {
							done[v] <- time.Now()
						}
					}
					last = max(last, m.Version())
				}
			}()
		}
		<-done[1]

		delays := make([]time.Duration, 0, changes)
		cur := st.Map()
		for v := uint64(2); v < changes+2; v++ {
			next, err := maptest.Move(cur, v, slots.MustNew(int(v)), "a")
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			st.Set(next)
			delays = append(delays, (<-done[v]).Sub(start))
			cur = next
		}
		slices.Sort(delays)
		b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "p99-ms")

		for _, c := range cs {
			c.Close()
		}
		wg.Wait()
		srv.Stop()
	}
}
