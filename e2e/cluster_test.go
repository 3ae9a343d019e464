package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/e2e/harness"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slotkv/kvclient"
	"github.com/slotd/slotd/slotkv/kvpb"
)

// clusterOpts shape a test cluster.
type clusterOpts struct {
	slotds int // slotd replicas over the etcd cluster; default 1
	nodes  int // slotkv nodes bootstrapped as n1..nN; default 3
	// weights of nodes by id; default 1.
	weights map[string]uint32
	// slotdArgs and nodeArgs are extra flags of every slotd and slotkv.
	slotdArgs, nodeArgs []string
	// nodeFlags, when set, gives extra flags of node id, after nodeArgs (a
	// flag given twice takes its last value: --slotd, --advertise or --http
	// replace the defaults). It runs once the slotds serve, before id starts.
	nodeFlags func(c *cluster, id string) []string
}

// cluster is a full deployment on 127.0.0.1: a real three-member etcd
// cluster, slotd replicas over it, slotkv nodes, and an in-process SDK.
//
// etcd runs as three `slotd etcd` processes, our embedded-etcd runner, not
// Debian's etcd-server: the members are the same etcd version as the
// library slotd links (go.mod pins it), the tests need no apt package or
// root, and the members are real separate processes that can be stopped
// and killed like any other.
type cluster struct {
	t *testing.T
	h *harness.Harness

	etcd    []*harness.Proc
	etcdEPs []string
	slotd   []*harness.Proc
	slotdEP []string
	nodes   map[string]*harness.Proc
	weights map[string]uint32
	opts    clusterOpts

	connMu sync.Mutex                  // guards conns: checks poll from their own goroutines
	conns  map[string]*grpc.ClientConn // by address, closed at cleanup
	sdk    *client.Client
	kv     *kvclient.Client
}

func newCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	if o.slotds == 0 {
		o.slotds = 1
	}
	if o.nodes == 0 {
		o.nodes = 3
	}
	c := &cluster{t: t, h: harness.New(t), nodes: map[string]*harness.Proc{}, weights: o.weights, opts: o, conns: map[string]*grpc.ClientConn{}}
	t.Cleanup(c.close)
	c.startEtcd()
	for i := 1; i <= o.slotds; i++ {
		c.startSlotd(fmt.Sprintf("s%d", i))
	}
	var ids []string
	for i := 1; i <= o.nodes; i++ {
		id := fmt.Sprintf("n%d", i)
		c.startNode(id)
		ids = append(ids, id)
	}
	c.waitRegistered(ids...)
	c.bootstrap(ids)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sdk, err := client.New(ctx, client.Options{Endpoints: c.slotdEP, MaxAttempts: 10})
	if err != nil {
		t.Fatalf("SDK: %v", err)
	}
	c.sdk, c.kv = sdk, kvclient.New(sdk)
	return c
}

// close releases the in-process clients; the harness kills the processes.
func (c *cluster) close() {
	if c.kv != nil {
		c.kv.Close()
	}
	if c.sdk != nil {
		c.sdk.Close()
	}
	c.connMu.Lock()
	defer c.connMu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
}

func (c *cluster) startEtcd() {
	var peers []string
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("e%d", i)
		peers = append(peers, fmt.Sprintf("%s=http://%s", name, c.h.Addr(name+"-peer")))
		c.etcdEPs = append(c.etcdEPs, "http://"+c.h.Addr(name+"-client"))
	}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("e%d", i)
		c.etcd = append(c.etcd, c.h.Start(name, "slotd", nil, "etcd", "--name", name, "--data-dir", c.h.Dir(name),
			"--client-url", c.h.Addr(name+"-client"), "--peer-url", c.h.Addr(name+"-peer"),
			"--initial-cluster", strings.Join(peers, ","), "--log-level", "warn"))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcdEPs, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	defer cli.Close()
	c.h.Eventually(60*time.Second, "etcd cluster of three answers", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, ep := range c.etcdEPs {
			st, err := cli.Status(ctx, ep)
			if err != nil {
				return err
			}
			if st.Leader == 0 {
				return fmt.Errorf("%s: no leader", ep)
			}
		}
		return nil
	})
}

func (c *cluster) startSlotd(name string) {
	addr := c.h.Addr(name)
	c.slotd = append(c.slotd, c.h.Start(name, "slotd", nil, append([]string{"--etcd-endpoints", strings.Join(c.etcdEPs, ","),
		"--listen", addr, "--http", "", "--name", name, "--log-level", "info"}, c.opts.slotdArgs...)...))
	c.slotdEP = append(c.slotdEP, addr)
	c.h.Eventually(60*time.Second, name+" serves Status", func() error {
		_, err := slotdv1.NewAdminClient(c.conn(addr)).Status(c.ctx(), &slotdv1.StatusRequest{})
		return err
	})
}

// nodeSlotd is the --slotd list of node i. Registration prefers the first
// endpoint that answers, so the nodes start from different replicas.
func (c *cluster) nodeSlotd(id string) string {
	eps := slices.Clone(c.slotdEP)
	if len(eps) > 1 && int(id[len(id)-1])%2 == 0 {
		slices.Reverse(eps)
	}
	return strings.Join(eps, ",")
}

func (c *cluster) weight(id string) uint32 { return max(1, c.weights[id]) }

func (c *cluster) startNode(id string) *harness.Proc {
	p := c.h.Start(id, "slotkv", nil, append([]string{"--id", id, "--listen", c.h.Addr(id), "--http", "",
		"--data-dir", c.h.Dir(id), "--slotd", c.nodeSlotd(id), "--fsync=false", "--weight", fmt.Sprint(c.weight(id))}, c.nodeArgs(id)...)...)
	c.nodes[id] = p
	return p
}

// nodeArgs are the extra flags of node id: nodeArgs, then nodeFlags'.
func (c *cluster) nodeArgs(id string) []string {
	args := slices.Clone(c.opts.nodeArgs)
	if c.opts.nodeFlags != nil {
		args = append(args, c.opts.nodeFlags(c, id)...)
	}
	return args
}

// waitRegistered waits until every id is a registered, active node.
func (c *cluster) waitRegistered(ids ...string) {
	c.h.Eventually(60*time.Second, fmt.Sprintf("nodes %v registered", ids), func() error {
		r, err := slotdv1.NewDirectoryClient(c.anyConn()).ListNodes(c.ctx(), &slotdv1.ListNodesRequest{})
		if err != nil {
			return err
		}
		for _, id := range ids {
			if !slices.ContainsFunc(r.GetNodes(), func(n *slotdv1.NodeInfo) bool {
				return n.GetNode().GetId() == id && n.GetNode().GetState() == slotdv1.NodeState_NODE_STATE_ACTIVE
			}) {
				return fmt.Errorf("%s not active yet", id)
			}
		}
		return nil
	})
}

func (c *cluster) bootstrap(ids []string) {
	var nodes []*slotdv1.Node
	for _, id := range ids {
		nodes = append(nodes, &slotdv1.Node{Id: id, Address: c.h.Addr(id), Weight: c.weight(id)})
	}
	c.admin(func(ac slotdv1.AdminClient) error {
		_, err := ac.Bootstrap(c.ctx(), &slotdv1.BootstrapRequest{Nodes: nodes, Operator: "e2e"})
		return err
	})
}

// ctx is a context for one control call. Its own timer releases it.
func (c *cluster) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	time.AfterFunc(10*time.Second, cancel)
	return ctx
}

func (c *cluster) conn(addr string) *grpc.ClientConn {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if conn, ok := c.conns[addr]; ok {
		return conn
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	c.conns[addr] = conn
	return conn
}

// anyConn is a connection to the first slotd replica that is running.
func (c *cluster) anyConn() *grpc.ClientConn {
	for i, p := range c.slotd {
		if p.Running() {
			return c.conn(c.slotdEP[i])
		}
	}
	c.t.Fatal("no slotd running")
	return nil
}

// admin runs fn against a running slotd, retrying on another replica (or
// later) while the answer is UNAVAILABLE.
func (c *cluster) admin(fn func(slotdv1.AdminClient) error) {
	c.t.Helper()
	c.h.Eventually(30*time.Second, "admin call", func() error {
		err := fn(slotdv1.NewAdminClient(c.anyConn()))
		if status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded {
			return err
		}
		if err != nil {
			c.t.Fatalf("admin call: %v", err)
		}
		return nil
	})
}

func (c *cluster) status() *slotdv1.StatusResponse {
	var st *slotdv1.StatusResponse
	c.admin(func(ac slotdv1.AdminClient) (err error) {
		st, err = ac.Status(c.ctx(), &slotdv1.StatusRequest{})
		return err
	})
	return st
}

func (c *cluster) setThrottle(bps uint64) {
	c.admin(func(ac slotdv1.AdminClient) error {
		_, err := ac.SetThrottle(c.ctx(), &slotdv1.SetThrottleRequest{BytesPerSecond: bps, Operator: "e2e"})
		return err
	})
}

// getMap reads the full map from replica i.
func (c *cluster) getMap(i int) (*slotmap.Map, error) {
	r, err := slotdv1.NewDirectoryClient(c.conn(c.slotdEP[i])).GetMap(c.ctx(), &slotdv1.GetMapRequest{})
	if err != nil {
		return nil, err
	}
	return slotmap.FromProto(r.GetMap())
}

// plan computes and stores a plan.
func (c *cluster) plan(req *slotdv1.PlanRequest) *slotdv1.Plan {
	req.Operator = "e2e"
	var p *slotdv1.Plan
	c.admin(func(ac slotdv1.AdminClient) error {
		r, err := ac.Plan(c.ctx(), req)
		p = r.GetPlan()
		return err
	})
	return p
}

func (c *cluster) apply(id string) {
	c.admin(func(ac slotdv1.AdminClient) error {
		_, err := ac.Apply(c.ctx(), &slotdv1.ApplyRequest{PlanId: id, Operator: "e2e"})
		return err
	})
}

func (c *cluster) getPlan(id string) *slotdv1.Plan {
	var p *slotdv1.Plan
	c.admin(func(ac slotdv1.AdminClient) error {
		r, err := ac.GetPlan(c.ctx(), &slotdv1.GetPlanRequest{PlanId: id})
		p = r.GetPlan()
		return err
	})
	return p
}

// move starts a one-move plan of slot to node and returns the plan's id.
func (c *cluster) move(slot uint32, to string) string {
	var p *slotdv1.Plan
	c.admin(func(ac slotdv1.AdminClient) error {
		r, err := ac.Move(c.ctx(), &slotdv1.MoveRequest{Slot: slot, To: to, Operator: "e2e", Reason: c.t.Name()})
		p = r.GetPlan()
		return err
	})
	return p.GetId()
}

// waitPlan waits until plan id is DONE; any other final state fails.
func (c *cluster) waitPlan(id string, timeout time.Duration) *slotdv1.Plan {
	c.t.Helper()
	var p *slotdv1.Plan
	c.h.Eventually(timeout, "plan "+id+" done", func() error {
		r, err := slotdv1.NewAdminClient(c.anyConn()).GetPlan(c.ctx(), &slotdv1.GetPlanRequest{PlanId: id})
		if err != nil {
			return err
		}
		p = r.GetPlan()
		switch p.GetState() {
		case slotdv1.PlanState_PLAN_STATE_DONE:
			return nil
		case slotdv1.PlanState_PLAN_STATE_FAILED, slotdv1.PlanState_PLAN_STATE_CANCELLED, slotdv1.PlanState_PLAN_STATE_ROLLED_BACK:
			c.t.Fatalf("plan %s ended %s: %s", id, p.GetState(), p.GetError())
		}
		pr := p.GetProgress()
		return fmt.Errorf("%s: %d of %d moves done", p.GetState(), pr.GetDone()+pr.GetSkipped(), pr.GetMoves())
	})
	return p
}

// waitPhase waits until a move of plan id is in flight in one of phases
// with at least minBytes copied, and returns it.
func (c *cluster) waitPhase(id string, minBytes uint64, phases ...slotdv1.MovePhase) *slotdv1.PlannedMove {
	c.t.Helper()
	var m *slotdv1.PlannedMove
	// Catch-up and fence can last well under Eventually's 50ms period, so
	// this polls every few milliseconds (bounded).
	waitfor.Err(c.t, 90*time.Second, fmt.Sprintf("a move of %s in %v", id, phases), func() error {
		return c.inPhase(id, minBytes, phases, &m)
	})
	return m
}

func (c *cluster) inPhase(id string, minBytes uint64, phases []slotdv1.MovePhase, m **slotdv1.PlannedMove) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := slotdv1.NewAdminClient(c.anyConn()).Status(ctx, &slotdv1.StatusRequest{})
	if err != nil {
		return err
	}
	for _, f := range st.GetInFlight() {
		if f.GetPlanId() == id && slices.Contains(phases, f.GetPhase()) && f.GetBytesCopied() >= minBytes {
			*m = f
			return nil
		}
	}
	return fmt.Errorf("in flight: %v", st.GetInFlight())
}

// rollback rolls plan id back and returns the reverse plan's id.
func (c *cluster) rollback(id string) string {
	var p *slotdv1.Plan
	c.admin(func(ac slotdv1.AdminClient) error {
		r, err := ac.Rollback(c.ctx(), &slotdv1.RollbackRequest{PlanId: id, Operator: "e2e", Reason: c.t.Name()})
		p = r.GetPlan()
		return err
	})
	return p.GetId()
}

func (c *cluster) removeNode(id string) {
	c.admin(func(ac slotdv1.AdminClient) error {
		_, err := ac.RemoveNode(c.ctx(), &slotdv1.RemoveNodeRequest{NodeId: id, Operator: "e2e"})
		return err
	})
}

// etcdLeader returns the index of the etcd member that leads.
func (c *cluster) etcdLeader() int {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcdEPs, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	defer cli.Close()
	leader := -1
	c.h.Eventually(30*time.Second, "etcd leader", func() error {
		ids := map[uint64]int{}
		var lead uint64
		for i, ep := range c.etcdEPs {
			st, err := cli.Status(c.ctx(), ep)
			if err != nil {
				return err
			}
			ids[st.Header.MemberId], lead = i, st.Leader
		}
		var ok bool
		if leader, ok = ids[lead]; !ok {
			return fmt.Errorf("leader %x is none of the members", lead)
		}
		return nil
	})
	return leader
}

// run runs a binary to completion and fails the test on a non-zero exit.
func (c *cluster) run(bin string, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, code := c.h.Run(ctx, bin, nil, args...)
	if code != 0 {
		c.t.Fatalf("%s %s: exit %d\n%s%s", bin, strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// load writes keys with `slotkv load`, as an application would.
func (c *cluster) load(prefix string, keys, size int) {
	c.run("slotkv", "load", "--slotd", strings.Join(c.slotdEP, ","), "--prefix", prefix,
		"--keys", fmt.Sprint(keys), "--size", fmt.Sprint(size), "--concurrency", "8")
}

// kvAt is a KV client for the node at addr, without the SDK's routing.
func (c *cluster) kvAt(addr string) kvpb.KVClient { return kvpb.NewKVClient(c.conn(addr)) }
