package e2e

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/e2e/harness"
	"github.com/slotd/slotd/slotkv/workload"
	"github.com/slotd/slotd/slots"
)

// keysFor returns one key per slot, named prefix:n, so the workload hits
// exactly the slots a plan moves.
func keysFor(prefix string, want []uint32) []string {
	todo := map[uint32]bool{}
	for _, s := range want {
		todo[s] = true
	}
	var out []string
	for n := 0; len(todo) > 0; n++ {
		k := fmt.Sprintf("%s:%d", prefix, n)
		if s := uint32(slots.ForString(k).Int()); todo[s] {
			delete(todo, s)
			out = append(out, k)
		}
	}
	return out
}

// spread picks n slots of a plan's moves, evenly over its order.
func spread(p *slotdv1.Plan, n int) []uint32 {
	ms := p.GetMoves()
	var out []uint32
	for i := 0; i < n && len(ms) > 0; i++ {
		out = append(out, ms[i*len(ms)/n].GetSlot())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestRebalanceAddNode (scenario 1): a fourth node joins and a plan fills it
// while clients read and write keys of the slots being moved.
func TestRebalanceAddNode(t *testing.T) {
	c := newCluster(t, clusterOpts{})
	c.startNode("n4")
	c.waitRegistered("n4")
	p := c.plan(&slotdv1.PlanRequest{MaxMoves: maxMoves(), Reason: "e2e: fill n4"})
	if len(p.GetMoves()) == 0 {
		t.Fatal("the plan for a new node moves nothing")
	}
	for _, m := range p.GetMoves() {
		if m.GetTo() != "n4" {
			t.Fatalf("move %v does not fill n4", m)
		}
	}
	s := begin(c, "1 rebalance 3->4", []loaded{{"s1", 2000, 100}},
		workload.Config{KeySet: keysFor("wl1", spread(p, 16)), Clients: 4})
	c.apply(p.GetId())
	// The full plan (E2E_FULL) is 4,096 moves: minutes on a busy 2-core machine.
	c.waitPlan(p.GetId(), 12*time.Minute)
	s.finish()
	if n := c.status().GetNodes(); !slices.ContainsFunc(n, func(l *slotdv1.NodeLoad) bool {
		return l.GetNode().GetId() == "n4" && int(l.GetSlots()) == len(p.GetMoves())
	}) {
		t.Errorf("n4 does not own the %d slots of the plan: %v", len(p.GetMoves()), n)
	}
}

// maxMoves bounds the rebalance plans: all of them with E2E_FULL, a sample
// in the short run.
func maxMoves() uint32 {
	if os.Getenv("E2E_FULL") != "" {
		return 0
	}
	return 256
}

// bigSlot loads a slot with enough data for a throttled copy to take a few
// seconds, and returns the slot and its loaded key set.
func bigSlot(tag string) (uint32, loaded) {
	return uint32(slots.ForString("{" + tag + "}").Int()), loaded{"{" + tag + "}", 1500, 1000}
}

// badRE finds the "bad" count in slotkv traffic -o json's summary.
var badRE = regexp.MustCompile(`"bad": (\d+)`)

// faultCase is one of scenarios 3 to 6: the big slot is moved under a
// slow throttle while the workload hits it, and fault runs once the move
// reaches one of phases.
type faultCase struct {
	name     string
	opts     clusterOpts
	errorsOK bool // the fault takes a store node away for a while
	phases   []slotdv1.MovePhase
	// burst runs a writer into the slot (slotkv traffic, as fast as it
	// goes) so that catch-up rounds fall behind: the mover records
	// CATCHING_UP only when a round of changes leaves a backlog.
	burst bool
	fault func(c *cluster, m *slotdv1.PlannedMove)
}

func faultMove(t *testing.T, fc faultCase) {
	c := newCluster(t, fc.opts)
	slot, big := bigSlot("big")
	owner := c.sdk.Map().RouteSlot(slots.MustNew(int(slot))).Owner()
	to := "n1"
	if owner == "n1" {
		to = "n2"
	}
	// Eight keys in the moving slot, four elsewhere.
	var keys []string
	for i := range 8 {
		keys = append(keys, fmt.Sprintf("{big}:wl:%d", i))
	}
	keys = append(keys, keysFor("wl", []uint32{1, 5000, 9000, 16000})...)
	s := begin(c, fc.name, []loaded{big, {"f", 1000, 100}}, workload.Config{KeySet: keys, Clients: 4})
	s.clientErrorsOK = fc.errorsOK
	// 1.5 MB at 150 kB/s: about ten seconds of copying to interrupt.
	c.setThrottle(150_000)
	id := c.move(slot, to)
	if fc.burst {
		w := c.h.Start("writer", "slotkv", nil, "traffic", "--slotd", strings.Join(c.slotdEP, ","), "--prefix", "{big}",
			"--keys", "0", "--rate", "5000", "--concurrency", "8", "--write-keys", "256", "-o", "json")
		defer func() {
			// traffic reads back every write it had acknowledged when it stops.
			w.Signal(syscall.SIGTERM)
			select {
			case <-w.Exited():
			case <-time.After(2 * time.Minute):
				t.Error("the writer did not stop")
			}
			// Its calls may fail while a node is away (unknown outcomes are
			// not held against it), but nothing it had acknowledged may be
			// missing and no read may be wrong.
			m := badRE.FindStringSubmatch(w.Output())
			if m == nil || m[1] != "0" {
				t.Errorf("writer into slot %d: lost writes or wrong reads, or no summary:\n%s", slot, w.Output())
			}
		}()
	}
	minBytes := uint64(0)
	if slices.Contains(fc.phases, slotdv1.MovePhase_MOVE_PHASE_COPYING) {
		minBytes = 1
	}
	m := c.waitPhase(id, minBytes, fc.phases...)
	fc.fault(c, m)
	c.setThrottle(0)
	c.waitPlan(id, 3*time.Minute)
	s.finish()
	if got := c.sdk.Map().RouteSlot(slots.MustNew(int(slot))).Owner(); got != to {
		t.Errorf("slot %d is owned by %s after its move to %s", slot, got, to)
	}
}

// TestKillMoverSlotd (scenario 3): the slotd leading the mover is SIGKILLed
// while it copies a slot; the other replica takes over and finishes (or
// aborts and retries) the move.
func TestKillMoverSlotd(t *testing.T) {
	faultMove(t, faultCase{
		name: "3 SIGKILL mover slotd mid-copy", opts: clusterOpts{slotds: 2},
		phases: []slotdv1.MovePhase{slotdv1.MovePhase_MOVE_PHASE_COPYING},
		fault: func(c *cluster, m *slotdv1.PlannedMove) {
			leader := c.status().GetMoverLeader()
			i := slices.IndexFunc(c.slotd, func(p *harness.Proc) bool { return p.Name == leader })
			if i < 0 {
				c.t.Fatalf("mover leader %q is none of our slotds", leader)
			}
			c.t.Logf("SIGKILL %s (mover leader) with slot %d in %s, %d bytes copied", leader, m.GetSlot(), m.GetPhase(), m.GetBytesCopied())
			c.slotd[i].Kill()
			c.h.Eventually(30*time.Second, "another slotd leads the mover", func() error {
				if l := c.status().GetMoverLeader(); l == "" || l == leader {
					return fmt.Errorf("leader %q", l)
				}
				return nil
			})
			c.slotd[i].Restart()
		},
	})
}

// TestKillSourceNode (scenario 4): the source of a move is SIGKILLed while
// it exports the slot, and restarted; the mover resumes or restarts the
// move. Calls to the source's slots fail while it is down.
func TestKillSourceNode(t *testing.T) {
	full(t)
	faultMove(t, faultCase{
		name: "4 SIGKILL source mid-copy", errorsOK: true,
		phases: []slotdv1.MovePhase{slotdv1.MovePhase_MOVE_PHASE_COPYING},
		fault: func(c *cluster, m *slotdv1.PlannedMove) {
			c.t.Logf("SIGKILL source %s of slot %d in %s, %d bytes copied", m.GetFrom(), m.GetSlot(), m.GetPhase(), m.GetBytesCopied())
			p := c.nodes[m.GetFrom()]
			p.Kill()
			p.Restart()
		},
	})
}

// TestKillTargetNode (scenario 5): the target is SIGKILLed while it replays
// the source's changes, and restarted.
func TestKillTargetNode(t *testing.T) {
	full(t)
	faultMove(t, faultCase{
		name: "5 SIGKILL target mid-catch-up", errorsOK: true, burst: true,
		phases: []slotdv1.MovePhase{slotdv1.MovePhase_MOVE_PHASE_CATCHING_UP},
		fault: func(c *cluster, m *slotdv1.PlannedMove) {
			c.t.Logf("SIGKILL target %s of slot %d in %s", m.GetTo(), m.GetSlot(), m.GetPhase())
			p := c.nodes[m.GetTo()]
			p.Kill()
			p.Restart()
		},
	})
}

// TestStopSourceAtCutover (scenario 6): the source is frozen (SIGSTOP) for
// five seconds as the move reaches its cutover (end of catch-up or fence).
func TestStopSourceAtCutover(t *testing.T) {
	full(t)
	faultMove(t, faultCase{
		name: "6 SIGSTOP source 5s at cutover", errorsOK: true, burst: true,
		phases: []slotdv1.MovePhase{slotdv1.MovePhase_MOVE_PHASE_CATCHING_UP, slotdv1.MovePhase_MOVE_PHASE_FENCED},
		fault: func(c *cluster, m *slotdv1.PlannedMove) {
			c.t.Logf("SIGSTOP source %s of slot %d in %s for 5s", m.GetFrom(), m.GetSlot(), m.GetPhase())
			// The cutover needs the catch-up done: let it run at full speed
			// into the frozen source.
			c.setThrottle(0)
			p := c.nodes[m.GetFrom()]
			p.Signal(syscall.SIGSTOP)
			<-time.After(5 * time.Second) // the fault's length, not a wait for a condition
			p.Signal(syscall.SIGCONT)
		},
	})
}

// TestDrainAndRemove (scenario 2): a light node is drained to empty under
// load, removed from the directory and stopped.
func TestDrainAndRemove(t *testing.T) {
	full(t)
	// n3 has a small weight, so draining it is a few hundred moves.
	c := newCluster(t, clusterOpts{weights: map[string]uint32{"n1": 16, "n2": 16, "n3": 1}})
	p := c.plan(&slotdv1.PlanRequest{Drain: []string{"n3"}, Reason: "e2e: drain n3"})
	if len(p.GetMoves()) == 0 {
		t.Fatal("the drain plan moves nothing")
	}
	s := begin(c, "2 drain a node and remove it", []loaded{{"s2", 2000, 100}},
		workload.Config{KeySet: keysFor("wl2", spread(p, 16)), Clients: 4})
	c.apply(p.GetId())
	c.waitPlan(p.GetId(), 5*time.Minute)
	c.removeNode("n3")
	if err := c.nodes["n3"].Stop(); err != nil {
		t.Errorf("n3 did not stop cleanly: %v", err)
	}
	s.finish()
	m := c.sdk.Map()
	if _, ok := m.Node("n3"); ok {
		t.Errorf("n3 is still in the map at version %d", m.Version())
	}
}

// TestStopEtcdMember (scenario 7): the etcd leader is stopped while a plan
// runs; the two remaining members keep the directory available, and the
// member rejoins afterwards.
func TestStopEtcdMember(t *testing.T) {
	full(t)
	c := newCluster(t, clusterOpts{})
	c.startNode("n4")
	c.waitRegistered("n4")
	p := c.plan(&slotdv1.PlanRequest{MaxMoves: 400, Reason: "e2e: fill n4"})
	s := begin(c, "7 stop an etcd member mid-plan", []loaded{{"s7", 2000, 100}},
		workload.Config{KeySet: keysFor("wl7", spread(p, 16)), Clients: 4})
	c.apply(p.GetId())
	c.h.Eventually(60*time.Second, "a quarter of the plan done", func() error {
		pr := c.getPlan(p.GetId()).GetProgress()
		if pr.GetDone()*4 < pr.GetMoves() {
			return fmt.Errorf("%d of %d done", pr.GetDone(), pr.GetMoves())
		}
		return nil
	})
	i := c.etcdLeader()
	t.Logf("stopping etcd leader %s", c.etcd[i].Name)
	if err := c.etcd[i].Stop(); err != nil {
		t.Logf("etcd member %s exited: %v", c.etcd[i].Name, err)
	}
	c.waitPlan(p.GetId(), 5*time.Minute)
	c.etcd[i].Restart()
	s.finish()
}

// TestRollbackFinishedPlan (scenario 8): a finished rebalance is rolled
// back under load; every slot it moved returns to its old owner.
func TestRollbackFinishedPlan(t *testing.T) {
	full(t)
	c := newCluster(t, clusterOpts{})
	c.startNode("n4")
	c.waitRegistered("n4")
	p := c.plan(&slotdv1.PlanRequest{MaxMoves: 300, Reason: "e2e: fill n4"})
	s := begin(c, "8 rollback a finished plan", []loaded{{"s8", 2000, 100}},
		workload.Config{KeySet: keysFor("wl8", spread(p, 16)), Clients: 4})
	c.apply(p.GetId())
	c.waitPlan(p.GetId(), 5*time.Minute)
	back := c.rollback(p.GetId())
	c.waitPlan(back, 5*time.Minute)
	if st := c.getPlan(p.GetId()).GetState(); st != slotdv1.PlanState_PLAN_STATE_ROLLED_BACK {
		t.Errorf("plan %s is %s after its rollback, want ROLLED_BACK", p.GetId(), st)
	}
	s.finish()
	m, err := c.getMap(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, mv := range p.GetMoves() {
		if got := m.OwnerID(slots.MustNew(int(mv.GetSlot()))); got != mv.GetFrom() {
			t.Errorf("slot %d is owned by %s after the rollback, want %s", mv.GetSlot(), got, mv.GetFrom())
		}
	}
}
