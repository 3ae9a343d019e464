package grpcapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slotkv"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slots"
)

// startKV serves a slotkv node that follows the map from addr; it stops
// when the test ends.
func startKV(t *testing.T, id, slotdAddr string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := slotkv.Open(slotkv.Config{ID: id, DataDir: t.TempDir(), Map: node.ClientMap{C: newClient(t, slotdAddr)}, NoSync: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = g.Serve(lis) }()
	go func() { defer wg.Done(); _ = srv.Run(ctx) }()
	t.Cleanup(func() {
		g.Stop()
		cancel()
		wg.Wait()
		srv.Close()
	})
	return lis.Addr().String()
}

// stack is a service with an executor, store nodes a and b (bootstrapped)
// and c (registered, empty), and an application client.
type stack struct {
	ac  slotdv1.AdminClient
	app *client.Client
	kv  func(addr string) kvpb.KVClient
}

func newStack(t *testing.T) *stack {
	t.Helper()
	e := etcdtest.New(t)
	d := newDir(t, e)
	ctl, err := mover.NewControl(mover.ControlConfig{Directory: d})
	if err != nil {
		t.Fatal(err)
	}
	pool := mover.NewStorePool(mover.PoolConfig{})
	t.Cleanup(func() { pool.Close() })
	exe, err := mover.NewExecutor(mover.ExecutorConfig{Directory: d, Control: ctl, Etcd: e.NewClient(t), Stores: pool,
		Name: "m1", Backoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, d, "127.0.0.1:0", func(c *Config) { c.Control, c.Mover = ctl, exe })
	xctx, stopExe := context.WithCancel(context.Background())
	exeDone := make(chan struct{})
	go func() { defer close(exeDone); _ = exe.Run(xctx) }()
	t.Cleanup(func() { stopExe(); <-exeDone })

	ctx := testCtx(t)
	ac := slotdv1.NewAdminClient(dial(t, srv.addr()))
	a, b := startKV(t, "a", srv.addr()), startKV(t, "b", srv.addr())
	if _, err := ac.Bootstrap(ctx, &slotdv1.BootstrapRequest{Nodes: []*slotdv1.Node{{Id: "a", Address: a}, {Id: "b", Address: b}}}); err != nil {
		t.Fatal(err)
	}
	c := startKV(t, "c", srv.addr())
	if _, err := ac.RegisterNode(ctx, &slotdv1.RegisterNodeRequest{Node: &slotdv1.Node{Id: "c", Address: c}}); err != nil {
		t.Fatal(err)
	}

	app := newClient(t, srv.addr())
	conns := map[string]kvpb.KVClient{}
	var mu sync.Mutex
	kv := func(addr string) kvpb.KVClient {
		mu.Lock()
		defer mu.Unlock()
		if conns[addr] == nil {
			conns[addr] = kvpb.NewKVClient(dial(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials())))
		}
		return conns[addr]
	}
	return &stack{ac: ac, app: app, kv: kv}
}

// put writes key through the client's routing.
func (s *stack) put(t *testing.T, key, value string) {
	t.Helper()
	err := s.app.DoString(testCtx(t), key, func(ctx context.Context, addr string, _ bool) error {
		_, err := s.kv(addr).Put(ctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte(value)})
		return err
	})
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// TestPlanRunsThroughExecutor is the whole path through this service: store
// nodes follow the map it serves, an operator plans and applies through
// Admin, the executor moves the slots, clients follow the map and read
// every key from its new owner.
func TestPlanRunsThroughExecutor(t *testing.T) {
	s := newStack(t)
	ac, app, kv := s.ac, s.app, s.kv
	ctx := testCtx(t)
	planned, err := ac.Plan(ctx, &slotdv1.PlanRequest{MaxMoves: 3, Reason: "fill c"})
	if err != nil {
		t.Fatal(err)
	}
	// One key in every slot the plan moves, written before it runs.
	keys := map[string]string{}
	for _, m := range planned.GetPlan().GetMoves() {
		key := fmt.Sprintf("{%d}", m.GetSlot())
		for i := 0; slots.ForString(key).Uint16() != uint16(m.GetSlot()); i++ {
			key = fmt.Sprintf("k%d", i)
		}
		keys[key] = "v-" + key
		s.put(t, key, keys[key])
	}

	if _, err := ac.Apply(ctx, &slotdv1.ApplyRequest{PlanId: planned.GetPlan().GetId()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the plan is done", func() bool {
		p, err := ac.GetPlan(ctx, &slotdv1.GetPlanRequest{PlanId: planned.GetPlan().GetId()})
		return err == nil && p.GetPlan().GetState() == slotdv1.PlanState_PLAN_STATE_DONE
	})
	st, err := ac.Status(ctx, &slotdv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetMoverLeader() != "m1" || st.GetActivePlan() != nil || len(st.GetInFlight()) != 0 {
		t.Errorf("status after the plan: leader %q, active %v, in flight %v", st.GetMoverLeader(), st.GetActivePlan(), st.GetInFlight())
	}
	v := st.GetVersion()
	eventually(t, "the client has the plan's map", func() bool { return app.Map().Version() >= v })
	for _, m := range planned.GetPlan().GetMoves() {
		if got := app.Map().OwnerID(slots.MustNew(int(m.GetSlot()))); got != "c" {
			t.Errorf("slot %d owned by %q after the plan, want c", m.GetSlot(), got)
		}
	}
	for key, want := range keys {
		var got *kvpb.GetResponse
		err := app.DoString(ctx, key, func(ctx context.Context, addr string, _ bool) error {
			var err error
			got, err = kv(addr).Get(ctx, &kvpb.GetRequest{Key: []byte(key)})
			return err
		})
		if err != nil || string(got.GetValue()) != want {
			t.Errorf("get %s after the move: %q, %v; want %q", key, got.GetValue(), err, want)
		}
	}
}

// TestStatusShowsMoveInFlight throttles a move of one slot holding about
// 400 KB to 100 KB/s, and reads its progress from Status while it copies.
func TestStatusShowsMoveInFlight(t *testing.T) {
	s := newStack(t)
	ctx := testCtx(t)
	// The hash tag puts every key in one slot.
	key := func(i int) string { return fmt.Sprintf("{big}:%d", i) }
	slot := uint32(slots.ForString(key(0)).Uint16())
	value := string(make([]byte, 10_000))
	for i := range 40 {
		s.put(t, key(i), value)
	}
	if _, err := s.ac.SetThrottle(ctx, &slotdv1.SetThrottleRequest{BytesPerSecond: 100_000}); err != nil {
		t.Fatal(err)
	}
	mv, err := s.ac.Move(ctx, &slotdv1.MoveRequest{Slot: slot, To: "c", Reason: "watch it go"})
	if err != nil {
		t.Fatal(err)
	}
	var seen *slotdv1.PlannedMove
	eventually(t, "Status shows bytes copied", func() bool {
		st, err := s.ac.Status(ctx, &slotdv1.StatusRequest{})
		if err != nil || len(st.GetInFlight()) != 1 || st.GetActivePlan().GetId() != mv.GetPlan().GetId() {
			return false
		}
		seen = st.GetInFlight()[0]
		return seen.GetBytesCopied() > 0
	})
	if seen.GetSlot() != slot || seen.GetTo() != "c" || seen.GetPlanId() != mv.GetPlan().GetId() || seen.GetPhase() == slotdv1.MovePhase_MOVE_PHASE_UNSPECIFIED {
		t.Errorf("in flight: %v", seen)
	}
	if _, err := s.ac.SetThrottle(ctx, &slotdv1.SetThrottleRequest{BytesPerSecond: 0}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the move commits", func() bool {
		p, err := s.ac.GetPlan(ctx, &slotdv1.GetPlanRequest{PlanId: mv.GetPlan().GetId()})
		return err == nil && p.GetPlan().GetState() == slotdv1.PlanState_PLAN_STATE_DONE
	})
}
