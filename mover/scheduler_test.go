package mover

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slots"
)

// schedMove is one move of TestSchedulerDonorRule's plan.
type schedMove struct {
	from string
	data bool // holds more than defaultSmallSlotBytes
}

// TestSchedulerDonorRule runs a plan at the default parallelism and
// watches what the stores and the executor do:
//   - a donor never serves two Export streams of slots holding data at
//     once (seen by the stores' Export calls);
//   - data moves of different donors run at once: n1's first data move is
//     held after its begin until a data move of n2 has begun;
//   - near-empty slots of one donor share the window: the first one is
//     held after its begin until four have begun, while n1's data copy is
//     held too;
//   - a donor's next data move begins before the previous one's copy is
//     over (it waits at the donor's gate, its directory round trips done):
//     n1's first data move is held after its begin, before its copy, until
//     n1's second data move has begun too.
//
// A scheduler that broke a rule would leave a held move waiting for what
// never comes (the test fails after a bound) or would show two data
// exports at once on one donor. The plan's size estimates are zero: the
// donors' reports decide what holds data.
func TestSchedulerDonorRule(t *testing.T) {
	c := newCluster(t, 3)
	snap, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	plan := []schedMove{
		{"n1", true}, {"n2", true}, {"n1", true}, {"n2", true}, {"n1", true},
		{"n1", false}, {"n1", false}, {"n1", false}, {"n1", false}, {"n1", false}, {"n1", false},
	}
	free := map[string][]slots.Slot{}
	for _, id := range []string{"n1", "n2"} {
		mine := snap.SlotsOf(id)
		for s := range mine.All() {
			free[id] = append(free[id], s)
		}
	}
	p := &Plan{ID: "donor-rule"}
	isData := map[uint32]bool{}
	for _, m := range plan {
		s := free[m.from][0]
		free[m.from] = free[m.from][1:]
		keys, size := 3, 100
		if m.data {
			keys, size = 40, 8<<10 // 320 KiB
			isData[uint32(s.Int())] = true
		}
		fillSlotTB(t, c.nodes[m.from], s, keys, size)
		p.Moves = append(p.Moves, PlannedMove{Slot: s.Int(), From: m.from, To: "n3"})
	}

	// The stores' side: data exports in progress per donor.
	var mu sync.Mutex // guards exporting and most
	exporting, most := map[string]int{}, map[string]int{}
	onExport := func(nd string, slot uint32, start bool) {
		if !isData[slot] {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if start {
			exporting[nd]++
			most[nd] = max(most[nd], exporting[nd])
		} else {
			exporting[nd]--
		}
	}
	c.onExport.Store(&onExport)

	// The executor's side: moves begun, and the holds.
	var bmu sync.Mutex // guards begun and the conditions' channels
	begun := map[int]bool{}
	type cond struct {
		name string
		met  func() bool // under bmu
		ch   chan struct{}
	}
	count := func(want func(i int) bool) int {
		n := 0
		for i := range begun {
			if want(i) {
				n++
			}
		}
		return n
	}
	conds := map[string]*cond{
		"n2 data begun": {met: func() bool {
			return count(func(i int) bool { return plan[i].from == "n2" && plan[i].data }) > 0
		}},
		"4 near-empty begun": {met: func() bool { return count(func(i int) bool { return !plan[i].data }) >= 4 }},
		"n1 second data begun": {met: func() bool {
			return count(func(i int) bool { return plan[i].from == "n1" && plan[i].data }) >= 2
		}},
	}
	for name, cd := range conds {
		cd.name, cd.ch = name, make(chan struct{})
	}
	check := func() {
		for _, cd := range conds {
			select {
			case <-cd.ch:
			default:
				if cd.met() {
					close(cd.ch)
				}
			}
		}
	}
	hold := func(name string) {
		select {
		case <-conds[name].ch:
		case <-time.After(time.Minute):
			t.Errorf("held move waited a minute for %q: the scheduler did not start it", name)
		case <-c.ctx.Done():
		}
	}
	firstSmall := -1
	for i, m := range plan {
		if !m.data {
			firstSmall = i
			break
		}
	}
	hook := func(event string, mv directory.Move, _ *planGuard) {
		if mv.PlanID != p.ID {
			return
		}
		switch event {
		case "begun":
			bmu.Lock()
			begun[mv.Index] = true
			check()
			bmu.Unlock()
			switch mv.Index {
			case 0:
				hold("n2 data begun")
				hold("n1 second data begun")
			case firstSmall:
				hold("4 near-empty begun")
			}
		}
	}
	startHooked(c, "a", hook)
	if err := c.ctl.SetThrottle(c.ctx, 8_000_000, "test"); err != nil {
		t.Fatal(err)
	}
	c.runPlan(p)
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"n1", "n2"} {
		if most[id] != 1 {
			t.Errorf("donor %s served %d data exports at once, want 1", id, most[id])
		}
	}
	after, _ := c.dir.Snapshot(c.ctx)
	for _, m := range p.Moves {
		if o := after.Owner(slots.MustNew(m.Slot)); o != "n3" {
			t.Errorf("slot %d owned by %s after the plan, want n3", m.Slot, o)
		}
	}
}

// TestSchedulerParallelismOne: Parallelism 1 is strictly one move at a
// time, near-empty slots included (the stores' Export calls never overlap).
func TestSchedulerParallelismOne(t *testing.T) {
	c := newCluster(t, 2)
	snap, _ := c.dir.Snapshot(c.ctx)
	p := &Plan{ID: "one-at-a-time"}
	mine := snap.SlotsOf("n1")
	for s := range mine.All() {
		if len(p.Moves) == 8 {
			break
		}
		fillSlotTB(t, c.nodes["n1"], s, 2, 100)
		p.Moves = append(p.Moves, PlannedMove{Slot: s.Int(), From: "n1", To: "n2"})
	}
	var mu sync.Mutex // guards exporting and most
	exporting, most := 0, 0
	onExport := func(_ string, _ uint32, start bool) {
		mu.Lock()
		defer mu.Unlock()
		if start {
			exporting++
			most = max(most, exporting)
		} else {
			exporting--
		}
	}
	c.onExport.Store(&onExport)
	c.startExecutorWith("a", func(cfg *ExecutorConfig) { cfg.Parallelism = 1 })
	c.runPlan(p)
	mu.Lock()
	defer mu.Unlock()
	if most != 1 {
		t.Errorf("%d exports at once at parallelism 1, want 1", most)
	}
}

// parName names a subtest of parallelism par (0: the default).
func parName(par int) string {
	if par == 0 {
		return "parallelism=default"
	}
	return fmt.Sprintf("parallelism=%d", par)
}

// startHooked runs an executor with hook set before it starts.
func startHooked(c *cluster, name string, hook func(string, directory.Move, *planGuard)) *Executor {
	c.t.Helper()
	e, err := NewExecutor(ExecutorConfig{
		Directory: c.dir, Control: c.ctl, Etcd: c.etcd.Client(), Stores: c.pool, Name: name,
		Logger: testLogger(), SessionTTL: 2, Backoff: 20 * time.Millisecond, DisableLiveness: true,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	e.hook = hook
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	var once sync.Once
	c.stops = append(c.stops, func() { once.Do(func() { cancel(); <-done }) })
	return e
}

// fillSlotTB writes n keys of size bytes into slot on node kn through its
// engine (a load, not client writes).
func fillSlotTB(t testing.TB, kn *kvNode, slot slots.Slot, n, size int) {
	t.Helper()
	val := make([]byte, size)
	var batch []node.Mutation
	for _, k := range keysInSlots(map[int]bool{slot.Int(): true}, n) {
		batch = append(batch, node.Mutation{Key: k, Value: val})
	}
	if err := kn.srv.Engine().Apply(context.Background(), slot, batch); err != nil {
		t.Fatal(err)
	}
}
