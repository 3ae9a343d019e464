package directory

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

// reportLatency reports the median and 99th percentile of ds in ms.
func reportLatency(b *testing.B, ds []time.Duration) {
	b.Helper()
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// benchSetup is setup with the etcd options of a benchmark variant.
func benchSetup(b *testing.B, fsync bool, nodes int) (*Directory, *Snapshot) {
	b.Helper()
	var opts []etcdtest.Option
	if fsync {
		opts = append(opts, etcdtest.WithFsync())
	}
	c := etcdtest.New(b, opts...)
	d := newDir(b, c, nil)
	snap, err := d.Bootstrap(testCtx(b), testNodes(nodes), 0, "bench")
	if err != nil {
		b.Fatal(err)
	}
	return d, snap
}

// BenchmarkSnapshot reads the full table (64 chunks, nodes, moves in one
// txn) and decodes it, with 16 nodes and 50 moves in flight.
func BenchmarkSnapshot(b *testing.B) {
	d, snap := benchSetup(b, false, 16)
	ctx := testCtx(b)
	set := snap.SlotsOf("n0")
	n := 0
	for s := range set.All() {
		if n == 50 {
			break
		}
		if _, err := d.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: "n1"}); err != nil {
			b.Fatal(err)
		}
		n++
	}
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := d.Snapshot(ctx); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	reportLatency(b, ds)
}

// BenchmarkMove measures one whole move in the directory: begin, advance
// to fenced, commit (three versioned txns, each preceded by a table read).
func BenchmarkMove(b *testing.B) {
	for _, fsync := range []bool{false, true} {
		b.Run(fmt.Sprintf("fsync=%v", fsync), func(b *testing.B) {
			d, snap := benchSetup(b, fsync, 4)
			ctx := testCtx(b)
			s := slots.MustNew(ownerSlot(b, snap, "n0"))
			from, to := "n0", "n1"
			var moves, commits []time.Duration
			for b.Loop() {
				start := time.Now()
				mv, err := d.BeginMove(ctx, MoveSpec{Slot: s, From: from, To: to})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := d.AdvanceMove(ctx, s, mv.MoveID, PhaseFenced); err != nil {
					b.Fatal(err)
				}
				cstart := time.Now()
				if _, err := d.CommitMove(ctx, s, mv.MoveID, "bench"); err != nil {
					b.Fatal(err)
				}
				end := time.Now()
				moves = append(moves, end.Sub(start))
				commits = append(commits, end.Sub(cstart))
				from, to = to, from
			}
			reportLatency(b, moves)
			slices.Sort(commits)
			b.ReportMetric(float64(commits[len(commits)/2])/float64(time.Millisecond), "commit-p50-ms")
			b.ReportMetric(float64(commits[min(len(commits)-1, len(commits)*99/100)])/float64(time.Millisecond), "commit-p99-ms")
		})
	}
}

// BenchmarkWatchDelivery measures from the start of a one-slot change
// (begin or abort of a move) to the watcher receiving the snapshot of its
// version: write txn, etcd watch event, decode, snapshot copy.
func BenchmarkWatchDelivery(b *testing.B) {
	for _, fsync := range []bool{false, true} {
		b.Run(fmt.Sprintf("fsync=%v", fsync), func(b *testing.B) {
			d, snap := benchSetup(b, fsync, 4)
			ctx, cancel := context.WithCancel(testCtx(b))
			got := make(chan uint64, 1024)
			done := make(chan error, 1)
			go func() {
				done <- d.Watch(ctx, snap.Version, func(s *Snapshot) error {
					got <- s.Version
					return nil
				})
			}()
			defer func() {
				cancel()
				<-done
			}()
			s := slots.MustNew(ownerSlot(b, snap, "n0"))
			var ds []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				var v uint64
				var err error
				if i%2 == 0 {
					_, err = d.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: "n1", MoveID: fmt.Sprintf("w%d", i)})
					v = snap.Version + uint64(i) + 1
				} else {
					v, err = d.AbortMove(ctx, s, fmt.Sprintf("w%d", i-1), "bench", "bench")
				}
				if err != nil {
					b.Fatal(err)
				}
				for w := range got {
					if w >= v {
						break
					}
				}
				ds = append(ds, time.Since(start))
				i++
			}
			reportLatency(b, ds)
		})
	}
}

// BenchmarkRenewLease is a store heartbeat's work in the directory: one
// etcd transaction reading the node's record and lease key, and one lease
// renewal (what the old Heartbeat did too).
func BenchmarkRenewLease(b *testing.B) {
	_, d, _ := setup(b, 3, nil)
	ctx := testCtx(b)
	l, err := d.GrantLease(ctx, "n0", Registrant{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.RenewLease(ctx, "n0", l.ID); err != nil {
			b.Fatal(err)
		}
	}
}
