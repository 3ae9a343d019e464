package directory

import (
	"errors"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/slots"
)

// moveOnce moves slot s from -> to through every phase.
func moveOnce(t *testing.T, d *Directory, s int, from, to string) {
	t.Helper()
	ctx := testCtx(t)
	sl := slots.MustNew(s)
	mv, err := d.BeginMove(ctx, MoveSpec{Slot: sl, From: from, To: to, By: "mover"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.AdvanceMove(ctx, sl, mv.MoveID, PhaseFenced); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CommitMove(ctx, sl, mv.MoveID, "mover"); err != nil {
		t.Fatal(err)
	}
}

func actions(es []AuditEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Kind) + ":" + e.Action
	}
	return out
}

// TestAuditOutlivesHistory: a run of moves longer than the history bound
// pushes the bootstrap and the node events out of the history, not out of
// the audit log. On the old code nothing but the history recorded them.
func TestAuditOutlivesHistory(t *testing.T) {
	_, d, snap := setup(t, 3, func(c *Config) { c.HistoryLimit = 10 })
	ctx := testCtx(t)
	if _, err := d.Drain(ctx, "n2", "retire the rack", "alice"); err != nil {
		t.Fatal(err)
	}
	// 4 moves = 12 versions: more than the history keeps.
	set := snap.SlotsOf("n2")
	n := 0
	for s := range set.All() {
		moveOnce(t, d, s.Int(), "n2", "n0")
		if n++; n == 4 {
			break
		}
	}
	hist, err := d.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range hist {
		if !strings.HasPrefix(c.Kind, "move-") {
			t.Fatalf("history still holds %s; the test needs it pushed out", c.Kind)
		}
	}
	got, err := d.Audit(ctx, AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"node:node-drain", "cluster:bootstrap"}; !slices.Equal(actions(got), want) {
		t.Fatalf("audit log = %v, want %v (newest first, no move entries)", actions(got), want)
	}
	if e := got[0]; e.Node != "n2" || e.By != "alice" || e.Reason != "retire the rack" || e.Version != 2 || e.At.IsZero() {
		t.Fatalf("drain entry = %+v", e)
	}
	if e := got[1]; e.By != "test" || e.Version != 1 {
		t.Fatalf("bootstrap entry = %+v", e)
	}
	nodes, err := d.Audit(ctx, AuditQuery{Kind: AuditNode})
	if err != nil || len(nodes) != 1 {
		t.Fatalf("node entries = %v, %v", actions(nodes), err)
	}
	if _, err := d.Audit(ctx, AuditQuery{Kind: "moves"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown kind: %v, want ErrInvalid", err)
	}
}

// TestAuditBounded: each kind keeps its newest AuditLimit entries, apart
// from the others: a flood of plan entries leaves node entries alone.
func TestAuditBounded(t *testing.T) {
	_, d, _ := setup(t, 2, func(c *Config) { c.AuditLimit = 5 })
	ctx := testCtx(t)
	if err := d.PutPlan(ctx, "p-0", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if _, err := d.SetWeight(WithAudit(ctx, AuditEntry{Kind: AuditNode, Reason: "step " + string(rune('a'+i))}), "n0", 2+i, "t"); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		if err := d.UpdatePlan(WithAudit(ctx, AuditEntry{Kind: AuditPlan, Action: ActionPause}), "p-0", func(b []byte) ([]byte, error) { return b, nil }); err != nil {
			t.Fatal(err)
		}
	}
	nodes, err := d.Audit(ctx, AuditQuery{Kind: AuditNode})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 5 || nodes[0].Reason != "step l" || nodes[4].Reason != "step h" {
		t.Fatalf("node entries = %d, newest %+v; want the 5 newest (step l .. step h)", len(nodes), nodes[0])
	}
	plans, err := d.Audit(ctx, AuditQuery{Kind: AuditPlan, Limit: 100})
	if err != nil || len(plans) != 5 {
		t.Fatalf("plan entries = %d, %v; want 5", len(plans), err)
	}
	if c, err := d.Audit(ctx, AuditQuery{Kind: AuditCluster}); err != nil || len(c) != 1 || c[0].Action != ChangeBootstrap {
		t.Fatalf("cluster entries = %v, %v; want the bootstrap alone", actions(c), err)
	}
	if two, err := d.Audit(ctx, AuditQuery{Limit: 2}); err != nil || len(two) != 2 {
		t.Fatalf("Limit 2 = %d entries, %v", len(two), err)
	}
}

// TestAuditSameTxn: an audit entry is written by the transaction of its
// action (same etcd revision as the key it changed), once, and not at all
// when the action does not happen.
func TestAuditSameTxn(t *testing.T) {
	c, d, _ := setup(t, 2, nil)
	ctx := testCtx(t)
	cli := c.Client()
	rev := func(key string) int64 {
		t.Helper()
		resp, err := cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("get %s: %v", key, err)
		}
		return resp.Kvs[0].ModRevision
	}
	newest := func(k AuditKind) (AuditEntry, int64) {
		t.Helper()
		resp, err := cli.Get(ctx, d.k.auditPrefix(string(k)), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("newest %s entry: %v", k, err)
		}
		es, err := d.Audit(ctx, AuditQuery{Kind: k, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return es[0], resp.Kvs[0].ModRevision
	}
	count := func() int {
		t.Helper()
		es, err := d.Audit(ctx, AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}

	// A node change: its entry shares the node key's revision.
	actx := WithAudit(ctx, AuditEntry{Kind: AuditNode, By: "alice", Reason: "bigger disk"})
	if _, err := d.SetWeight(actx, "n1", 3, "alice"); err != nil {
		t.Fatal(err)
	}
	e, r := newest(AuditNode)
	if r != rev(d.k.node("n1")) || e.Action != ChangeNodeWeight || e.Reason != "bigger disk" || e.By != "alice" || e.Detail != "weight 1 -> 3" {
		t.Fatalf("weight entry %+v at revision %d, node key at %d", e, r, rev(d.k.node("n1")))
	}
	// The same context again writes no second caller entry: the change's own.
	if _, err := d.SetWeight(actx, "n1", 4, "bob"); err != nil {
		t.Fatal(err)
	}
	if e, _ := newest(AuditNode); e.By != "bob" || e.Reason == "bigger disk" {
		t.Fatalf("a spent entry was written twice: %+v", e)
	}

	// A plan write with an attached entry: same revision as the plan key.
	if err := d.PutPlan(ctx, "p-1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	before := count()
	pctx := WithAudit(ctx, AuditEntry{Kind: AuditPlan, Action: ActionPause, By: "carol"})
	if err := d.UpdatePlan(pctx, "p-1", func(b []byte) ([]byte, error) { return []byte(`{"paused":true}`), nil }); err != nil {
		t.Fatal(err)
	}
	e, r = newest(AuditPlan)
	if r != rev(d.k.plan("p-1")) || e.PlanID != "p-1" || e.By != "carol" || e.Action != ActionPause {
		t.Fatalf("pause entry %+v at revision %d, plan key at %d", e, r, rev(d.k.plan("p-1")))
	}
	// An action that fails records nothing: a refused edit, a refused
	// node change, an existing plan created again.
	refused := errors.New("refused")
	if err := d.UpdatePlan(WithAudit(ctx, AuditEntry{Kind: AuditPlan, Action: ActionResume}), "p-1",
		func([]byte) ([]byte, error) { return nil, refused }); !errors.Is(err, refused) {
		t.Fatal(err)
	}
	if _, err := d.RemoveNode(WithAudit(ctx, AuditEntry{Kind: AuditNode, By: "dave"}), "n0", "oops", "dave"); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("remove a node that owns slots: %v", err)
	}
	if err := d.CreatePlan(WithAudit(ctx, AuditEntry{Kind: AuditPlan, Action: ActionMove}), "p-1", []byte("{}")); !errors.Is(err, ErrConflict) {
		t.Fatalf("create an existing plan: %v", err)
	}
	if n := count(); n != before+1 {
		t.Fatalf("audit log has %d entries after the failed actions, want %d", n, before+1)
	}
	// The throttle: always audited, in its own txn.
	if err := d.SetThrottle(WithAudit(ctx, AuditEntry{Kind: AuditCluster, Action: ActionThrottle, By: "erin"}), 1<<20); err != nil {
		t.Fatal(err)
	}
	e, r = newest(AuditCluster)
	if r != rev(d.k.throttle()) || e.By != "erin" || !strings.Contains(e.Detail, "1048576 bytes/s") {
		t.Fatalf("throttle entry %+v at revision %d, throttle key at %d", e, r, rev(d.k.throttle()))
	}
	// The balancer's policy: audited with who and why.
	if _, err := d.UpdateAutoPolicy(ctx, "frank", "freeze for the sale", func(p *AutoPolicy) error { p.Frozen = true; return nil }); err != nil {
		t.Fatal(err)
	}
	e, r = newest(AuditCluster)
	if r != rev(d.k.autoPolicy()) || e.Action != ActionAutoPolicy || e.By != "frank" || e.Reason != "freeze for the sale" || !strings.Contains(e.Detail, "frozen true") {
		t.Fatalf("policy entry %+v at revision %d, policy key at %d", e, r, rev(d.k.autoPolicy()))
	}
	// A move is history, not audit.
	before = count()
	snap, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	moveOnce(t, d, ownerSlot(t, snap, "n0"), "n0", "n1")
	if n := count(); n != before {
		t.Fatalf("a move wrote %d audit entries", n-before)
	}
}
