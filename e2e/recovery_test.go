package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/redirect"
	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slotkv/workload"
	"github.com/slotd/slotd/slots"
)

// Scenarios 9 (a)-(d): stores clean up after themselves and a
// node can be lost for good. Nodes reconcile fast here (every 500ms, after
// a 1s grace; the defaults are 15s and 30s) and slotd marks a silent node
// down after 2s, so that the scenarios take seconds, not minutes.
func recoveryOpts(o clusterOpts) clusterOpts {
	o.slotdArgs = append(o.slotdArgs, "--down-after", "2s", "--hold-down", "1s")
	o.nodeArgs = append(o.nodeArgs, "--reconcile-interval", "500ms", "--reconcile-grace", "1s")
	return o
}

// orphanBytes returns what every node last reported of data nothing
// explains (absent: no report, or no live lease).
func (c *cluster) orphanBytes() map[string]int64 {
	out := map[string]int64{}
	r, err := slotdv1.NewDirectoryClient(c.anyConn()).ListNodes(c.ctx(), &slotdv1.ListNodesRequest{})
	if err != nil {
		return out
	}
	for _, n := range r.GetNodes() {
		if n.OrphanBytes != nil {
			out[n.GetNode().GetId()] = n.GetOrphanBytes()
		}
	}
	return out
}

// waitClean waits until every node of ids reports 0 orphan bytes.
func (c *cluster) waitClean(timeout time.Duration, ids ...string) {
	c.t.Helper()
	c.h.Eventually(timeout, fmt.Sprintf("nodes %v report 0 orphan bytes", ids), func() error {
		got := c.orphanBytes()
		for _, id := range ids {
			b, ok := got[id]
			if !ok || b != 0 {
				return fmt.Errorf("orphan bytes %v", got)
			}
		}
		return nil
	})
}

// slotctl runs slotctl against the cluster and returns its exit code and
// output.
func (c *cluster) slotctl(args ...string) (string, string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.h.Run(ctx, "slotctl", nil, append([]string{"--endpoints", strings.Join(c.slotdEP, ","), "--operator", "e2e"}, args...)...)
}

// slotsOf returns up to n slots owned by the nodes of ids in the SDK's map,
// spread over the slot range.
func (c *cluster) slotsOf(n int, ids ...string) []uint32 {
	m := c.sdk.Map()
	var all []uint32
	for i := range slots.Count {
		if slices.Contains(ids, m.OwnerID(slots.MustNew(i))) {
			all = append(all, uint32(i))
		}
	}
	var out []uint32
	for i := 0; i < n && len(all) > 0; i++ {
		out = append(out, all[i*len(all)/n])
	}
	return slices.Compact(out)
}

func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o600)
	})
}

// TestFailNodeAndComeBack (scenario 9 a): n3 is SIGKILLed and its data
// deleted; it is declared failed; writes to its former slots succeed at
// once on their new owners and no other slot is touched. Then a process
// with a copy of n3's old data starts under its id: it serves nothing of
// it, drops it, and rejoins empty.
func TestFailNodeAndComeBack(t *testing.T) {
	c := newCluster(t, recoveryOpts(clusterOpts{}))
	// Keys in n3's slots, with values that must never be served again.
	n3Keys := keysFor("old", c.slotsOf(16, "n3"))
	for _, k := range n3Keys {
		c.h.Eventually(20*time.Second, "put "+k, func() error {
			_, err := c.kv.Put(c.ctx(), []byte(k), []byte("stale"))
			return err
		})
	}
	s := begin(c, "9 (a) fail a node, bring its data back", nil,
		workload.Config{KeySet: keysFor("wl9a", c.slotsOf(16, "n1", "n2")), Clients: 4})
	before := c.sdk.Map()

	old := c.nodes["n3"]
	old.Kill()
	copyAt := c.h.Dir("n3-copy")
	if err := copyDir(c.h.Dir("n3"), copyAt); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(c.h.Dir("n3")); err != nil {
		t.Fatal(err)
	}
	var res nodeFailResult
	c.h.Eventually(60*time.Second, "n3 declared failed", func() error {
		out, errOut, code := c.slotctl("nodes", "fail", "n3", "--accept-data-loss", "--yes", "--reason", "e2e: disk gone", "-o", "json")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errOut)
		}
		return json.Unmarshal([]byte(out), &res)
	})
	n3Set := before.SlotsOf("n3")
	if !res.Applied || res.SlotCount != uint32(n3Set.Count()) {
		t.Fatalf("nodes fail: %+v", res)
	}
	// Writes to n3's former slots succeed, on empty slots.
	for _, k := range n3Keys {
		c.h.Eventually(20*time.Second, "write to a former slot of n3", func() error {
			_, err := c.kv.Put(c.ctx(), []byte(k), []byte("new"))
			return err
		})
		v, _, found, err := c.kv.Get(c.ctx(), []byte(k))
		if err != nil || !found || string(v) != "new" {
			t.Fatalf("read %s back: %q %v %v", k, v, found, err)
		}
	}
	// No other slot changed owner.
	after := c.sdk.Map()
	for i := range slots.Count {
		sl := slots.MustNew(i)
		if o := before.OwnerID(sl); o != "n3" && after.OwnerID(sl) != o {
			t.Fatalf("slot %d moved from %s to %s", i, o, after.OwnerID(sl))
		}
	}

	// The old data comes back under n3's id.
	back := c.h.Start("n3-back", "slotkv", nil, append([]string{"--id", "n3", "--listen", c.h.Addr("n3"), "--http", "",
		"--data-dir", copyAt, "--slotd", c.nodeSlotd("n3"), "--fsync=false"}, c.opts.nodeArgs...)...)
	c.nodes["n3"] = back
	kv := c.kvAt(c.h.Addr("n3"))
	c.h.Eventually(30*time.Second, "n3 is back, owning nothing, answering MOVED for its old keys", func() error {
		for _, k := range n3Keys {
			r, err := kv.Get(c.ctx(), &kvpb.GetRequest{Key: []byte(k)})
			if err == nil {
				// Never a value: the stale one would be a lost write of "new".
				t.Fatalf("n3 came back and served %q = %q", k, r.GetValue())
			}
			if rd, ok := redirect.FromError(err); !ok || rd.Kind != redirect.Moved {
				return fmt.Errorf("%s: %v", k, err) // no map yet: UNAVAILABLE
			}
		}
		return nil
	})
	c.waitRegistered("n3")
	c.waitClean(60*time.Second, "n1", "n2", "n3")
	if n := c.sdk.Map().SlotsOf("n3"); n.Count() != 0 {
		t.Fatalf("n3 owns %d slots after coming back", n.Count())
	}
	s.finish()
}

// nodeFailResult is slotctl nodes fail -o json.
type nodeFailResult struct {
	Applied   bool              `json:"applied"`
	Version   uint64            `json:"version"`
	SlotCount uint32            `json:"slot_count"`
	NewOwners map[string]uint32 `json:"new_owners"`
}

// TestKillSlotdAndDrainingNode (scenario 9 b): the slotd leading the mover
// and the node being drained are SIGKILLed together mid-drain, and
// restarted. The drain finishes (its plan resumed, or planned again if it
// failed), no acknowledged write is lost, and every node ends clean.
func TestKillSlotdAndDrainingNode(t *testing.T) {
	full(t)
	c := newCluster(t, recoveryOpts(clusterOpts{slotds: 2, weights: map[string]uint32{"n1": 16, "n2": 16, "n3": 1}}))
	p := c.plan(&slotdv1.PlanRequest{Drain: []string{"n3"}, Reason: "e2e: drain n3"})
	if len(p.GetMoves()) == 0 {
		t.Fatal("the drain plan moves nothing")
	}
	s := begin(c, "9 (b) SIGKILL slotd and draining node", []loaded{{"s9b", 1000, 100}},
		workload.Config{KeySet: keysFor("wl9b", spread(p, 32)), Clients: 4})
	s.clientErrorsOK = true
	c.apply(p.GetId())
	c.h.Eventually(2*time.Minute, "a third of the drain done", func() error {
		if d := c.getPlan(p.GetId()).GetProgress().GetDone(); int(d) < len(p.GetMoves())/3 {
			return fmt.Errorf("%d of %d done", d, len(p.GetMoves()))
		}
		return nil
	})
	leader := c.status().GetMoverLeader()
	i := -1
	for j, pr := range c.slotd {
		if pr.Name == leader {
			i = j
		}
	}
	if i < 0 {
		t.Fatalf("mover leader %q is none of our slotds", leader)
	}
	t.Logf("SIGKILL %s (mover leader) and n3 (draining) together", leader)
	c.slotd[i].Kill()
	c.nodes["n3"].Kill()
	c.slotd[i].Restart()
	c.nodes["n3"].Restart()
	c.finishDrain(p.GetId(), "n3", 5*time.Minute)
	c.waitClean(2*time.Minute, "n1", "n2", "n3")
	s.finish()
}

// finishDrain waits until node id owns nothing: it resumes plan id when it
// paused, and plans the drain again when it ended otherwise.
func (c *cluster) finishDrain(id, node string, timeout time.Duration) {
	c.t.Helper()
	c.h.Eventually(timeout, node+" drained", func() error {
		m, err := c.getMap(c.runningSlotd())
		if err != nil {
			return err
		}
		if n := m.SlotsOf(node); n.Count() == 0 && len(m.Migrations()) == 0 {
			return nil
		}
		r, err := slotdv1.NewAdminClient(c.anyConn()).GetPlan(c.ctx(), &slotdv1.GetPlanRequest{PlanId: id})
		if err != nil {
			return err
		}
		switch r.GetPlan().GetState() {
		case slotdv1.PlanState_PLAN_STATE_PAUSED:
			_, err = slotdv1.NewAdminClient(c.anyConn()).Resume(c.ctx(), &slotdv1.ResumeRequest{PlanId: id, Operator: "e2e"})
		case slotdv1.PlanState_PLAN_STATE_FAILED, slotdv1.PlanState_PLAN_STATE_CANCELLED, slotdv1.PlanState_PLAN_STATE_DONE:
			var pr *slotdv1.PlanResponse
			pr, err = slotdv1.NewAdminClient(c.anyConn()).Plan(c.ctx(), &slotdv1.PlanRequest{Drain: []string{node}, Operator: "e2e", Reason: "e2e: drain again"})
			if err == nil && len(pr.GetPlan().GetMoves()) > 0 {
				id = pr.GetPlan().GetId()
				_, err = slotdv1.NewAdminClient(c.anyConn()).Apply(c.ctx(), &slotdv1.ApplyRequest{PlanId: id, Operator: "e2e"})
			}
		}
		if err != nil && status.Code(err) != codes.FailedPrecondition {
			return err
		}
		return fmt.Errorf("plan %s %s, %d moves done", id, r.GetPlan().GetState(), r.GetPlan().GetProgress().GetDone())
	})
}

func (c *cluster) runningSlotd() int {
	for i, p := range c.slotd {
		if p.Running() {
			return i
		}
	}
	return 0
}

// TestStopFencedSource (scenario 9 c): the source of a move is frozen
// (SIGSTOP) at the cutover for longer than slotd's down-after, so it is
// marked down with its slot fenced. Thawed, it comes back; the move commits
// or aborts, and the source ends with no fence or copy left over: the slot
// takes writes wherever it ended up.
func TestStopFencedSource(t *testing.T) {
	full(t)
	c := newCluster(t, recoveryOpts(clusterOpts{}))
	slot, big := bigSlot("fenced")
	owner := c.sdk.Map().RouteSlot(slots.MustNew(int(slot))).Owner()
	to := "n1"
	if owner == "n1" {
		to = "n2"
	}
	var keys []string
	for i := range 8 {
		keys = append(keys, fmt.Sprintf("{fenced}:wl:%d", i))
	}
	keys = append(keys, keysFor("wl9c", []uint32{1, 5000, 9000, 16000})...)
	s := begin(c, "9 (c) SIGSTOP fenced source past down-after", []loaded{big}, workload.Config{KeySet: keys, Clients: 4})
	s.clientErrorsOK = true
	c.setThrottle(150_000)
	id := c.move(slot, to)
	// A writer into the slot, as fast as it goes, so that catch-up rounds
	// fall behind: CATCHING_UP is recorded only with a backlog, and the
	// fenced phase alone lasts milliseconds.
	w := c.h.Start("writer", "slotkv", nil, "traffic", "--slotd", strings.Join(c.slotdEP, ","), "--prefix", "{fenced}",
		"--keys", "0", "--rate", "5000", "--concurrency", "8", "--write-keys", "256", "-o", "json")
	defer func() {
		w.Signal(syscall.SIGTERM)
		select {
		case <-w.Exited():
		case <-time.After(2 * time.Minute):
			t.Error("the writer did not stop")
		}
		if m := badRE.FindStringSubmatch(w.Output()); m == nil || m[1] != "0" {
			t.Errorf("writer into slot %d: lost writes or wrong reads, or no summary:\n%s", slot, w.Output())
		}
	}()
	m := c.waitPhase(id, 0, slotdv1.MovePhase_MOVE_PHASE_CATCHING_UP, slotdv1.MovePhase_MOVE_PHASE_FENCED)
	c.setThrottle(0)
	src := c.nodes[m.GetFrom()]
	t.Logf("SIGSTOP source %s of slot %d in %s past down-after", m.GetFrom(), slot, m.GetPhase())
	src.Signal(syscall.SIGSTOP)
	c.h.Eventually(30*time.Second, m.GetFrom()+" marked down", func() error {
		r, err := slotdv1.NewDirectoryClient(c.anyConn()).ListNodes(c.ctx(), &slotdv1.ListNodesRequest{})
		if err != nil {
			return err
		}
		for _, n := range r.GetNodes() {
			if n.GetNode().GetId() == m.GetFrom() && n.GetNode().GetState() == slotdv1.NodeState_NODE_STATE_DOWN {
				return nil
			}
		}
		return fmt.Errorf("%s not down", m.GetFrom())
	})
	src.Signal(syscall.SIGCONT)
	c.h.Eventually(3*time.Minute, "the move over and the slot writable", func() error {
		mp, err := c.getMap(c.runningSlotd())
		if err != nil {
			return err
		}
		if _, moving := mp.Migration(slots.MustNew(int(slot))); moving {
			return fmt.Errorf("slot %d still moving", slot)
		}
		_, err = c.kv.Put(c.ctx(), []byte("{fenced}:probe"), []byte("x"))
		return err
	})
	c.waitClean(2*time.Minute, "n1", "n2", "n3")
	s.finish()
}

// TestLeaderKilledAfterCommits (scenario 9 d): the mover leader is SIGKILLed
// right after a plan's moves started committing, so the clean-up of some
// handed-off copies dies with it. The other replica finishes the plan; the
// sources drop what they handed off through reconciliation alone, and every
// node's orphan bytes return to 0.
func TestLeaderKilledAfterCommits(t *testing.T) {
	full(t)
	c := newCluster(t, recoveryOpts(clusterOpts{slotds: 2}))
	c.startNode("n4")
	c.waitRegistered("n4")
	p := c.plan(&slotdv1.PlanRequest{MaxMoves: 48, Reason: "e2e: fill n4"})
	if len(p.GetMoves()) == 0 {
		t.Fatal("the plan moves nothing")
	}
	s := begin(c, "9 (d) SIGKILL leader after commits", nil,
		workload.Config{KeySet: keysFor("wl9d", spread(p, 16)), Clients: 4})
	// A move fenced when the leader dies stays fenced until the next leader
	// settles it: writes to that slot may fail meanwhile (still checked).
	s.clientErrorsOK = true
	// Data in every moving slot, so every source has a copy to clean up.
	for _, k := range keysFor("data9d", spread(p, len(p.GetMoves()))) {
		c.h.Eventually(20*time.Second, "put "+k, func() error {
			_, err := c.kv.Put(c.ctx(), []byte(k), make([]byte, 4096))
			return err
		})
	}
	c.apply(p.GetId())
	c.h.Eventually(2*time.Minute, "the first commits", func() error {
		if d := c.getPlan(p.GetId()).GetProgress().GetDone(); d < 4 {
			return fmt.Errorf("%d done", d)
		}
		return nil
	})
	leader := c.status().GetMoverLeader()
	for _, pr := range c.slotd {
		if pr.Name == leader {
			t.Logf("SIGKILL %s (mover leader) after %d commits", leader, c.getPlan(p.GetId()).GetProgress().GetDone())
			pr.Kill()
			defer pr.Restart()
		}
	}
	c.h.Eventually(30*time.Second, "another slotd leads the mover", func() error {
		if l := c.status().GetMoverLeader(); l == "" || l == leader {
			return fmt.Errorf("leader %q", l)
		}
		return nil
	})
	c.finishPlan(p.GetId(), 3*time.Minute)
	c.waitClean(2*time.Minute, "n1", "n2", "n3", "n4")
	s.finish()
}

// finishPlan waits until plan id is done, resuming it when the leader's
// death paused it.
func (c *cluster) finishPlan(id string, timeout time.Duration) {
	c.t.Helper()
	c.h.Eventually(timeout, "plan "+id+" done", func() error {
		r, err := slotdv1.NewAdminClient(c.anyConn()).GetPlan(c.ctx(), &slotdv1.GetPlanRequest{PlanId: id})
		if err != nil {
			return err
		}
		switch r.GetPlan().GetState() {
		case slotdv1.PlanState_PLAN_STATE_DONE:
			return nil
		case slotdv1.PlanState_PLAN_STATE_PAUSED:
			_, _ = slotdv1.NewAdminClient(c.anyConn()).Resume(c.ctx(), &slotdv1.ResumeRequest{PlanId: id, Operator: "e2e"})
		case slotdv1.PlanState_PLAN_STATE_FAILED, slotdv1.PlanState_PLAN_STATE_CANCELLED:
			c.t.Fatalf("plan %s ended %s: %s", id, r.GetPlan().GetState(), r.GetPlan().GetError())
		}
		return fmt.Errorf("%s", r.GetPlan().GetState())
	})
}
