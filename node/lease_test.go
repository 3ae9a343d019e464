package node

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/slots"
)

// TestLeaseArithmetic: a lease holds for TTL - margin counted from the
// moment the renewal that succeeded was SENT, on the store's clock.
func TestLeaseArithmetic(t *testing.T) {
	const ttl, margin = 10 * time.Second, time.Second
	t0 := time.Unix(1000, 0)
	type step struct {
		at      time.Duration // the clock, from t0
		renew   *time.Duration
		lease   int64 // the renewal's lease id (default 1)
		lost    bool
		held    bool // what Check says after the step
		comment string
	}
	sent := func(d time.Duration) *time.Duration { return &d }
	tests := []struct {
		name  string
		steps []step
	}{
		{"not held before the first renewal", []step{
			{at: 0, held: false},
		}},
		{"holds until TTL - margin after the send, not a moment longer", []step{
			{at: 0, renew: sent(0), held: true},
			{at: 9*time.Second - time.Nanosecond, held: true},
			{at: 9 * time.Second, held: false, comment: "TTL - margin"},
			{at: 10 * time.Second, held: false},
		}},
		{"counted from the send, not from the answer", []step{
			{at: 4 * time.Second, renew: sent(0), held: true, comment: "answered 4s after it was sent"},
			{at: 9 * time.Second, held: false},
		}},
		{"a renewal that succeeded late lifts the fence", []step{
			{at: 0, renew: sent(0), held: true},
			{at: 9500 * time.Millisecond, held: false},
			{at: 9600 * time.Millisecond, renew: sent(3 * time.Second), held: true, comment: "sent at 3s, answered at 9.6s: holds until 12s"},
			{at: 12 * time.Second, held: false},
		}},
		{"an answer that comes after it is due changes nothing", []step{
			{at: 0, renew: sent(0), held: true},
			{at: 16 * time.Second, renew: sent(5 * time.Second), held: false, comment: "sent at 5s: held until 14s, over already"},
		}},
		{"an older renewal's late answer does not shorten a newer one", []step{
			{at: 6 * time.Second, renew: sent(5 * time.Second), held: true},
			{at: 7 * time.Second, renew: sent(3 * time.Second), held: true},
			{at: 13500 * time.Millisecond, held: true, comment: "still until 14s"},
			{at: 14 * time.Second, held: false},
		}},
		{"lost drops the lease at once", []step{
			{at: 0, renew: sent(0), held: true},
			{at: time.Second, lost: true, held: false},
			{at: 2 * time.Second, held: false},
		}},
		{"a new lease after a loss holds", []step{
			{at: 0, renew: sent(0), held: true},
			{at: time.Second, lost: true, held: false},
			{at: 3 * time.Second, renew: sent(2 * time.Second), lease: 2, held: true},
			{at: 11*time.Second - time.Nanosecond, held: true},
			{at: 11 * time.Second, held: false},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &simClock{now: t0}
			l := NewLease("a", clock, slog.New(slog.DiscardHandler))
			for i, st := range tc.steps {
				clock.now = t0.Add(st.at)
				switch {
				case st.renew != nil:
					id := st.lease
					if id == 0 {
						id = 1
					}
					l.Renewed(id, t0.Add(*st.renew), ttl, margin)
				case st.lost:
					l.Lost()
				}
				err := l.Check()
				if held := err == nil; held != st.held {
					t.Fatalf("step %d (at %v; %s): held = %v, want %v (err %v)", i, st.at, st.comment, held, st.held, err)
				}
				if err != nil && (!errors.Is(err, ErrSelfFenced) || l.SelfFenced() != true) {
					t.Fatalf("step %d: err = %v, want ErrSelfFenced", i, err)
				}
			}
		})
	}
}

// slowStore is a memStore whose Apply takes the given time on clock (a
// slow disk, or a pause of the process).
type slowStore struct {
	*memStore
	clock *simClock
	takes time.Duration
}

func (s *slowStore) Apply(ctx context.Context, sl slots.Slot, batch []Mutation) error {
	s.clock.now = s.clock.now.Add(s.takes)
	return s.memStore.Apply(ctx, sl, batch)
}

// TestNodeSelfFences: a node serves the slots it owns only while its lease
// holds; after that every read and write of them is a retryable
// UNAVAILABLE that says since when, and nothing is applied.
func TestNodeSelfFences(t *testing.T) {
	ctx := context.Background()
	clock := &simClock{now: time.Unix(1000, 0)}
	lease := NewLease("a", clock, slog.New(slog.DiscardHandler))
	st := &slowStore{memStore: newMemStore(), clock: clock}
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	other := slots.ForString("{other}")
	m.Set("b", "127.0.0.1:2", other)
	reg := prometheus.NewRegistry()
	n, err := New(Config{ID: "a", Store: st, Map: m, StateDir: t.TempDir(), Lease: lease, Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	fenced := func() float64 {
		mf, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range mf {
			if f.GetName() == "slotd_node_self_fenced" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("slotd_node_self_fenced not exported")
		return 0
	}
	key := []byte("{k}:1")

	// Not registered yet: nothing served.
	if err := n.Write(ctx, key, put("{k}:1", "v0")); !errors.Is(err, ErrSelfFenced) || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("write before a lease: %v", err)
	}
	if fenced() != 1 {
		t.Fatal("slotd_node_self_fenced is not 1 before a lease")
	}

	lease.Renewed(7, clock.now, 3*time.Second, 300*time.Millisecond)
	if err := n.Write(ctx, key, put("{k}:1", "v1")); err != nil {
		t.Fatalf("write with a lease: %v", err)
	}
	if err := n.CheckRead(key); err != nil {
		t.Fatalf("read with a lease: %v", err)
	}
	if fenced() != 0 {
		t.Fatal("slotd_node_self_fenced is not 0 while the lease holds")
	}

	// Cut off: 2.7 s after the renewal was sent, nothing is served.
	clock.now = clock.now.Add(2700 * time.Millisecond)
	werr := n.Write(ctx, key, put("{k}:1", "v2"))
	if !errors.Is(werr, ErrSelfFenced) {
		t.Fatalf("write after the lease ran out: %v, want ErrSelfFenced", werr)
	}
	if s := status.Convert(StatusError(werr)); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "cut off from slotd since") {
		t.Fatalf("status %v %q, want UNAVAILABLE saying since when", s.Code(), s.Message())
	}
	if err := n.CheckRead(key); !errors.Is(err, ErrSelfFenced) {
		t.Fatalf("read after the lease ran out: %v, want ErrSelfFenced", err)
	}
	if got := string(st.data[slots.ForKey(key)]["{k}:1"]); got != "v1" {
		t.Fatalf("a refused write was applied: %q", got)
	}
	// A slot it does not own still redirects: that answer is no promise.
	if err := n.CheckRead([]byte("{other}")); !errors.Is(err, ErrMoved) {
		t.Fatalf("read of another node's slot: %v, want MOVED", err)
	}
	if fenced() != 1 {
		t.Fatal("slotd_node_self_fenced is not 1 after the lease ran out")
	}

	// A renewal lifts it; a write whose apply outlasts the lease is not
	// acknowledged.
	lease.Renewed(7, clock.now, 3*time.Second, 300*time.Millisecond)
	st.takes = 3 * time.Second
	err = n.Write(ctx, key, put("{k}:1", "v3"))
	var sf *SelfFencedError
	if !errors.As(err, &sf) || !sf.Applied {
		t.Fatalf("a write applied past the lease: %v, want a SelfFencedError marked applied", err)
	}
}
