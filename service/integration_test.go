package service

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/client/node"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/slotkv"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slots"
)

// sdkMap is a store node's map: the SDK's, fed by this service.
type sdkMap struct{ c *client.Client }

func (m sdkMap) Owner(s slots.Slot) (node.Owner, bool) {
	cur := m.c.Map()
	if cur == nil || cur.Empty() {
		return node.Owner{}, false
	}
	r := cur.RouteSlot(s)
	return node.Owner{ID: r.Owner(), Addr: r.Addr(), Version: cur.Version()}, r.OK()
}

// startKV serves a slotkv node that follows the map from addr; it stops
// when the test ends.
func startKV(t *testing.T, id, slotdAddr string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := slotkv.Open(slotkv.Config{ID: id, DataDir: t.TempDir(), Map: sdkMap{newClient(t, slotdAddr)}, NoSync: true})
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

// TestPlanRunsThroughExecutor is the whole path through this service: store
// nodes follow the map it serves, an operator plans and applies through
// Admin, the executor moves the slots, clients follow the map and read
// every key from its new owner.
func TestPlanRunsThroughExecutor(t *testing.T) {
	e := etcdtest.New(t)
	d := newDir(t, e)
	ctl, err := mover.NewControl(mover.ControlConfig{Directory: d})
	if err != nil {
		t.Fatal(err)
	}
	pool := mover.NewStorePool(mover.PoolConfig{})
	t.Cleanup(func() { pool.Close() })
	exe, err := mover.NewExecutor(mover.ExecutorConfig{Directory: d, Control: ctl, Etcd: e.NewClient(t), Stores: pool,
		Name: "m1", Backoff: 20 * time.Millisecond, ProgressInterval: 50 * time.Millisecond})
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
		err := app.DoString(ctx, key, func(ctx context.Context, addr string, _ bool) error {
			_, err := kv(addr).Put(ctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte(keys[key])})
			return err
		})
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
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
