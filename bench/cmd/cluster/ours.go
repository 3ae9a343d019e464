package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/slotkv/kvclient"
	"github.com/slotd/slotd/slots"
)

// ourCluster is slotd (embedded etcd) and slotkv nodes as processes.
type ourCluster struct {
	ps        *procs
	bin       string
	dataDir   string // slotkv data (on disk: fsync means something)
	slotdAddr string
	slotdHTTP string
	nodes     map[string]*ourNode
	conn      *grpc.ClientConn
	admin     slotdv1.AdminClient
	sdk       *client.Client
	kv        *kvclient.Client
	reg       *prometheus.Registry
}

type ourNode struct {
	id, addr, http string
	fsync          bool
	p              *proc
}

func (c *ourCluster) slotctl(ctx context.Context, args ...string) (string, error) {
	return run(ctx, filepath.Join(c.bin, "slotctl"), append([]string{"--endpoints", c.slotdAddr}, args...)...)
}

// startOurs starts slotd (with slotdArgs added to its flags) with its etcd
// in etcdDir and nodes n1..nN, and bootstraps the directory over the first
// `initial` of them.
func startOurs(ctx context.Context, ps *procs, bin, etcdDir, dataDir string, n, initial int, fsync bool, slotdArgs ...string) (*ourCluster, error) {
	pp, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	c := &ourCluster{ps: ps, bin: bin, dataDir: dataDir, nodes: map[string]*ourNode{},
		slotdAddr: fmt.Sprintf("127.0.0.1:%d", pp[0]), slotdHTTP: fmt.Sprintf("127.0.0.1:%d", pp[1])}
	flags := append([]string{"--data-dir", etcdDir, "--listen", c.slotdAddr, "--http", c.slotdHTTP,
		"--etcd-client-url", fmt.Sprintf("127.0.0.1:%d", pp[2]), "--etcd-peer-url", fmt.Sprintf("127.0.0.1:%d", pp[3]), "--log-level", "warn"}, slotdArgs...)
	if _, err := ps.start("slotd", filepath.Join(bin, "slotd"), flags...); err != nil {
		return nil, err
	}
	if err := poll(ctx, 60*time.Second, 200*time.Millisecond, "slotd", func() error { _, err := c.slotctl(ctx, "status"); return err }); err != nil {
		return nil, err
	}
	for i := 1; i <= n; i++ {
		if err := c.addNode(ctx, "n"+strconv.Itoa(i), fsync); err != nil {
			return nil, err
		}
	}
	args := []string{"init"}
	for i := 1; i <= initial; i++ {
		nd := c.nodes["n"+strconv.Itoa(i)]
		args = append(args, "--node", nd.id+"="+nd.addr)
	}
	if _, err := c.slotctl(ctx, args...); err != nil {
		return nil, err
	}
	c.conn, err = grpc.NewClient(c.slotdAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c.admin = slotdv1.NewAdminClient(c.conn)
	c.reg = prometheus.NewRegistry()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c.sdk, err = client.New(wctx, client.Options{Endpoints: []string{c.slotdAddr}, MaxAttempts: 10, Registerer: c.reg})
	if err != nil {
		return nil, err
	}
	c.kv = kvclient.New(c.sdk)
	return c, nil
}

func (c *ourCluster) close() {
	if c.kv != nil {
		c.kv.Close()
	}
	if c.sdk != nil {
		c.sdk.Close()
	}
	if c.conn != nil {
		c.conn.Close()
	}
}

// extraNodeArgs are added to every slotkv's flags (the load item sets it).
var extraNodeArgs []string

// addNode starts slotkv id (or restarts it with the same ports and data)
// and waits until slotd lists it.
func (c *ourCluster) addNode(ctx context.Context, id string, fsync bool) error {
	nd := c.nodes[id]
	if nd == nil {
		pp, err := freePorts(2)
		if err != nil {
			return err
		}
		nd = &ourNode{id: id, addr: fmt.Sprintf("127.0.0.1:%d", pp[0]), http: fmt.Sprintf("127.0.0.1:%d", pp[1])}
		c.nodes[id] = nd
	}
	nd.fsync = fsync
	p, err := c.ps.start("slotkv-"+id, filepath.Join(c.bin, "slotkv"), append([]string{"--id", id, "--listen", nd.addr, "--http", nd.http,
		"--data-dir", filepath.Join(c.dataDir, id), "--slotd", c.slotdAddr, "--fsync=" + strconv.FormatBool(fsync), "--log-level", "warn"}, extraNodeArgs...)...)
	if err != nil {
		return err
	}
	nd.p = p
	return poll(ctx, 30*time.Second, 100*time.Millisecond, "node "+id, func() error {
		if _, err := http.Get("http://" + nd.http + "/healthz"); err != nil {
			return err
		}
		out, err := c.slotctl(ctx, "nodes", "list", "-o", "json")
		if err != nil {
			return err
		}
		if !strings.Contains(out, `"`+id+`"`) {
			return errors.New("not registered")
		}
		return nil
	})
}

// restart stops every node and starts it again with fsync.
func (c *ourCluster) restartAll(ctx context.Context, fsync bool) error {
	for id, nd := range c.nodes {
		nd.p.stop()
		if err := c.addNode(ctx, id, fsync); err != nil {
			return err
		}
	}
	return nil
}

// ourTag returns a hash tag whose keys land in one of node's slots.
func (c *ourCluster) ourTag(owner string, skip map[int]bool) (string, slots.Slot) {
	m := c.sdk.Map()
	for i := 0; ; i++ {
		t := "s" + strconv.Itoa(i)
		s := slots.ForString("{" + t + "}")
		if m.OwnerID(s) == owner && !skip[s.Int()] {
			return t, s
		}
	}
}

// put writes keys fmt(i) for i in [0,n) with conc writers.
func (c *ourCluster) put(ctx context.Context, n, size, conc int, key func(i int) string) error {
	val := []byte(strings.Repeat("v", size))
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	next := make(chan int, 1024)
	go func() {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if _, err := c.kv.Put(ctx, []byte(key(i)), val); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// move moves slot to `to` and returns the time from the Move call until
// the SDK's map shows the new owner; then waits for the plan to end.
func (c *ourCluster) move(ctx context.Context, s slots.Slot, to string) (time.Duration, error) {
	if err := c.waitDropped(ctx, s, to); err != nil {
		return 0, err
	}
	ch, cancel := c.sdk.Subscribe()
	defer cancel()
	start := time.Now()
	resp, err := c.admin.Move(ctx, &slotdv1.MoveRequest{Slot: uint32(s.Int()), To: to, Operator: "bench"})
	if err != nil {
		return 0, fmt.Errorf("move %d to %s: %w", s.Int(), to, err)
	}
	var took time.Duration
	tctx, tcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer tcancel()
	for took == 0 {
		select {
		case m := <-ch:
			if m.OwnerID(s) == to {
				took = time.Since(start)
			}
		case <-tctx.Done():
			return 0, fmt.Errorf("move %d to %s: map never showed it", s.Int(), to)
		}
	}
	return took, c.waitPlan(ctx, resp.GetPlan().GetId())
}

func (c *ourCluster) waitPlan(ctx context.Context, id string) error {
	return poll(ctx, 5*time.Minute, 5*time.Millisecond, "plan "+id, func() error {
		r, err := c.admin.GetPlan(ctx, &slotdv1.GetPlanRequest{PlanId: id})
		if err != nil {
			return err
		}
		switch st := r.GetPlan().GetState(); st {
		case slotdv1.PlanState_PLAN_STATE_DONE:
			return nil
		case slotdv1.PlanState_PLAN_STATE_FAILED, slotdv1.PlanState_PLAN_STATE_CANCELLED:
			return stopPolling{fmt.Errorf("plan %s %s: %s", id, st, r.GetPlan().GetError())}
		case slotdv1.PlanState_PLAN_STATE_PAUSED:
			if e := r.GetPlan().GetError(); e != "" {
				return stopPolling{fmt.Errorf("plan %s paused: %s", id, e)}
			}
			return fmt.Errorf("plan %s %s", id, st)
		default:
			return fmt.Errorf("plan %s %s", id, st)
		}
	})
}

// waitDropped waits until node `to` holds nothing of slot s: a node that
// gave the slot away drops its old copy in the background and refuses to
// import the slot again until that ends (the mover's retries of a move are
// shorter than dropping 100,000 keys), so a move back is only timed once
// the target is clean.
func (c *ourCluster) waitDropped(ctx context.Context, s slots.Slot, to string) error {
	nd := c.nodes[to]
	if nd == nil {
		return fmt.Errorf("no node %s", to)
	}
	conn, err := grpc.NewClient(nd.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	st := slotdv1.NewStoreClient(conn)
	return poll(ctx, 2*time.Minute, 20*time.Millisecond, fmt.Sprintf("slot %d dropped on %s", s.Int(), to), func() error {
		r, err := st.SlotStats(ctx, &slotdv1.SlotStatsRequest{Slots: []uint32{uint32(s.Int())}})
		if err != nil {
			return err
		}
		for _, x := range r.GetSlots() {
			if x.GetKeys() > 0 {
				return fmt.Errorf("%d keys left", x.GetKeys())
			}
		}
		return nil
	})
}

func (c *ourCluster) throttle(ctx context.Context, bps uint64) error {
	_, err := c.admin.SetThrottle(ctx, &slotdv1.SetThrottleRequest{BytesPerSecond: bps, Operator: "bench"})
	return err
}

// metrics returns slotd's /metrics samples by full series name.
func (c *ourCluster) metrics() (map[string]float64, error) {
	r, err := http.Get("http://" + c.slotdHTTP + "/metrics")
	if err != nil {
		return nil, err
	}
	defer r.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// histQuantile estimates quantile q of a Prometheus histogram from the
// difference of two scrapes: the upper bound of the bucket holding it.
func histQuantile(before, after map[string]float64, name string, q float64) (float64, int) {
	type b struct{ le, n float64 }
	var bs []b
	for k, v := range after {
		if !strings.HasPrefix(k, name+"_bucket{le=\"") {
			continue
		}
		les := strings.TrimSuffix(strings.TrimPrefix(k, name+"_bucket{le=\""), "\"}")
		le, err := strconv.ParseFloat(les, 64)
		if err != nil {
			continue
		}
		bs = append(bs, b{le, v - before[k]})
	}
	total := after[name+"_count"] - before[name+"_count"]
	if total == 0 {
		return 0, 0
	}
	best := -1.0
	for _, x := range bs {
		if x.n >= q*total && (best < 0 || x.le < best) {
			best = x.le
		}
	}
	return best, int(total)
}

// sdkCounter reads one series of the SDK's metrics.
func (c *ourCluster) sdkCounter(name, label, value string) float64 {
	mfs, err := c.reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
