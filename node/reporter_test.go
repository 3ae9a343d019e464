package node

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// recordingLoad is a Load server that keeps what it is sent, or refuses.
type recordingLoad struct {
	slotdv1.UnimplementedLoadServer
	mu      sync.Mutex // guards got
	got     []*slotdv1.LoadReport
	refuse  bool
	arrived chan struct{}
}

func (r *recordingLoad) Report(_ context.Context, rep *slotdv1.LoadReport) (*slotdv1.LoadReportResponse, error) {
	defer func() { r.arrived <- struct{}{} }()
	if r.refuse {
		return nil, status.Error(codes.Unavailable, "behind")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rep)
	return &slotdv1.LoadReportResponse{}, nil
}

func serveLoad(t *testing.T, srv *recordingLoad) slotdv1.LoadClient {
	t.Helper()
	return slotdv1.NewLoadClient(serveTest(t, func(g *grpc.Server) { slotdv1.RegisterLoadServer(g, srv) }))
}

// TestReporterRun: Run reports at once and then at every interval of its
// clock, to every replica over gRPC, whatever another replica answers;
// each report is the node's owned slots with data, at the map's version.
func TestReporterRun(t *testing.T) {
	clock := newTickClock()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	other := slots.MustNew(7)
	m.Set("b", "127.0.0.1:2", other)
	st := newMemStore()
	n := newTestNode(t, st, m, t.TempDir())
	ctx := context.Background()
	mine := slots.MustNew(8)
	for _, s := range []slots.Slot{mine, other} {
		if err := st.Apply(ctx, s, []Mutation{{Key: keyIn(s), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	ok := &recordingLoad{arrived: make(chan struct{}, 16)}
	bad := &recordingLoad{refuse: true, arrived: make(chan struct{}, 16)}
	r, err := NewReporter(ReporterConfig{Node: n, Replicas: []slotdv1.LoadClient{serveLoad(t, ok), serveLoad(t, bad)}, Clock: clock, Interval: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(rctx) }()
	for round := 1; round <= 3; round++ {
		<-ok.arrived
		<-bad.arrived
		<-clock.waiting // Run waits for the next interval
		ok.mu.Lock()
		got := len(ok.got)
		rep := ok.got[got-1]
		ok.mu.Unlock()
		if got != round {
			t.Fatalf("round %d: %d reports", round, got)
		}
		if rep.GetNodeId() != "a" || rep.GetVersion() != m.Version() || rep.GetInterval().AsDuration() != 7*time.Second ||
			len(rep.GetSlots()) != 1 || rep.GetSlots()[0].GetSlot() != uint32(mine.Uint16()) || rep.GetSlots()[0].GetKeys() != 1 {
			t.Fatalf("round %d: report %v", round, rep)
		}
		clock.advance(7 * time.Second)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := NewReporter(ReporterConfig{Node: n}); err == nil {
		t.Fatal("a reporter without replicas was accepted")
	}
}

// TestReporterFirstReportWhenMapArrives: a node without a map yet reports
// as soon as it has one (firstRetry later), not a whole interval later;
// after its first report went through, it waits the interval.
func TestReporterFirstReportWhenMapArrives(t *testing.T) {
	clock := newTickClock()
	m := new(StaticMap) // no map yet
	n := newTestNode(t, newMemStore(), m, t.TempDir())
	ok, stop := runReporter(t, n, clock, time.Minute)
	<-clock.waiting // the first try failed: no map
	m.SetAll("a", "127.0.0.1:1")
	clock.advance(firstRetry)
	<-ok.arrived // reported firstRetry after, not a minute after
	<-clock.waiting
	clock.advance(firstRetry)
	select {
	case <-ok.arrived:
		t.Fatal("a second report firstRetry after the first: want the interval")
	default:
	}
	clock.advance(time.Minute)
	<-ok.arrived
	<-clock.waiting
	stop()
}

// TestReporterReportsGainsEarly: once a slot the node gained is measured
// (a fold has covered a second of it), the Reporter reports at once, long
// before its interval, and the report lists the slot with what it holds.
func TestReporterReportsGainsEarly(t *testing.T) {
	clock := newTickClock()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	gained := slots.MustNew(9)
	m.Set("b", "127.0.0.1:2", gained)
	n, err := New(Config{ID: "a", Store: newMemStore(), Map: m, StateDir: t.TempDir(), Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.foldLoad(clock.Now())
	ok, stop := runReporter(t, n, clock, time.Minute)
	<-ok.arrived                                     // the first report, at once
	<-clock.waiting                                  // then it waits
	if err := n.CheckRead([]byte("x")); err != nil { // the node's first look at its map
		t.Fatal(err)
	}
	m.Set("a", "127.0.0.1:1", gained) // the slot moves here
	if err := n.Write(context.Background(), keyIn(gained), put(string(keyIn(gained)), "v")); err != nil {
		t.Fatal(err)
	}
	clock.advance(1100 * time.Millisecond)
	<-clock.waiting // looked: not measured yet, waits again
	n.foldLoad(clock.Now())
	clock.advance(time.Second)
	<-ok.arrived // early: 2.1 s into a one-minute interval
	ok.mu.Lock()
	rep := ok.got[len(ok.got)-1]
	ok.mu.Unlock()
	listed := false
	for _, s := range rep.GetSlots() {
		if s.GetSlot() == uint32(gained.Uint16()) {
			listed = s.GetKeys() == 1 && s.GetMeasuredSeconds() >= 1
		}
	}
	if !listed {
		t.Fatalf("the early report does not list the gained slot with its key and measured age: %v", rep)
	}
	<-clock.waiting
	stop()
}

// runReporter runs a Reporter of n on clock, every interval, to one
// recording replica; stop ends it and checks Run's result.
func runReporter(t *testing.T, n *Node, clock *tickClock, interval time.Duration) (ok *recordingLoad, stop func()) {
	t.Helper()
	ok = &recordingLoad{arrived: make(chan struct{}, 16)}
	r, err := NewReporter(ReporterConfig{Node: n, Replicas: []slotdv1.LoadClient{serveLoad(t, ok)}, Clock: clock, Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	return ok, func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
