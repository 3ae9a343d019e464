package grpcapi

import (
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/migrations"
)

type stepClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestFailNode: only a node down past its hold-down with no live lease can
// be declared failed; the preview changes nothing; applying gives its slots
// to the other nodes in one version, removes it, and history says the data
// is lost and who said so. The node can come back as a new, empty one.
func TestFailNode(t *testing.T) {
	ctx := testCtx(t)
	e := etcdtest.New(t)
	clock := &stepClock{now: time.Now()}
	d, err := directory.New(directory.Config{Client: e.NewClient(t), Now: clock.Now, DownAfter: 5 * time.Second, HoldDown: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	before := bootstrap(t, d)
	srv := startServer(t, d, "127.0.0.1:0", nil)
	rc := slotdv1.NewRecoveryClient(dial(t, srv.addr()))
	fail := func(req *slotdv1.FailNodeRequest) (*slotdv1.FailNodeResponse, codes.Code) {
		t.Helper()
		resp, err := rc.FailNode(ctx, req)
		return resp, status.Code(err)
	}

	if _, code := fail(&slotdv1.FailNodeRequest{NodeId: "c", DryRun: true}); code != codes.FailedPrecondition {
		t.Fatalf("an active node: %v, want FailedPrecondition", code)
	}
	if _, code := fail(&slotdv1.FailNodeRequest{NodeId: "nosuch", DryRun: true}); code != codes.NotFound {
		t.Fatalf("an unknown node: %v, want NotFound", code)
	}
	// c's last load report (it expires long before c can be declared
	// failed) is the estimate of what is lost.
	var cReport []*slotdv1.SlotLoad
	cset := before.SlotsOf("c")
	for sl := range cset.All() {
		cReport = append(cReport, &slotdv1.SlotLoad{Slot: uint32(sl.Int()), Keys: 1, Bytes: 100})
		if len(cReport) == 3 {
			break
		}
	}
	// The replica takes reports once its map hub has a map (Unavailable
	// until then); anything else is a refusal.
	lc := slotdv1.NewLoadClient(dial(t, srv.addr()))
	waitfor.Err(t, 20*time.Second, "load report taken", func() error {
		_, err := lc.Report(ctx, &slotdv1.LoadReport{NodeId: "c", Version: before.Version, Slots: cReport})
		if status.Code(err) != codes.Unavailable && err != nil {
			t.Fatalf("load report: %v", err)
		}
		return err
	})
	// a and b heartbeat; c went silent: the liveness pass marks it down.
	for _, id := range []string{"a", "b"} {
		if err := d.Touch(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(10 * time.Second)
	if _, err := d.CheckLiveness(ctx); err != nil {
		t.Fatal(err)
	}
	// Down, but not for the hold-down yet: the preview works, applying does not.
	preview, code := fail(&slotdv1.FailNodeRequest{NodeId: "c", DryRun: true})
	if code != codes.OK {
		t.Fatalf("preview: %v", code)
	}
	cSlots := before.SlotsOf("c")
	var given uint32
	for _, no := range preview.GetNewOwners() {
		if no.GetNodeId() == "c" {
			t.Fatal("the failed node is a new owner")
		}
		given += no.GetSlots()
	}
	if !preview.GetBytesKnown() || preview.GetEstimatedBytesLost() != 300 {
		t.Fatalf("estimated bytes lost %d (known %v), want 300 from c's last report", preview.GetEstimatedBytesLost(), preview.GetBytesKnown())
	}
	if preview.GetApplied() || preview.GetSlotCount() != uint32(cSlots.Count()) || given != preview.GetSlotCount() || len(preview.GetNewOwners()) != 2 {
		t.Fatalf("preview %+v, want %d slots to a and b", preview, cSlots.Count())
	}
	if _, code := fail(&slotdv1.FailNodeRequest{NodeId: "c", AcceptDataLoss: true}); code != codes.FailedPrecondition {
		t.Fatalf("inside the hold-down: %v, want FailedPrecondition", code)
	}
	clock.Advance(time.Minute)
	if _, code := fail(&slotdv1.FailNodeRequest{NodeId: "c"}); code != codes.FailedPrecondition {
		t.Fatalf("without accept_data_loss: %v, want FailedPrecondition", code)
	}
	if _, code := fail(&slotdv1.FailNodeRequest{NodeId: "c", AcceptDataLoss: true, ExpectVersion: 1}); code != codes.Aborted {
		t.Fatalf("at another version: %v, want Aborted", code)
	}
	v0, _ := d.Version(ctx)
	resp, code := fail(&slotdv1.FailNodeRequest{NodeId: "c", AcceptDataLoss: true, ExpectVersion: v0, Reason: "disk gone"})
	if code != codes.OK || !resp.GetApplied() || resp.GetVersion() != v0+1 {
		t.Fatalf("apply: %v %+v, want applied at %d", code, resp, v0+1)
	}
	snap, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Node("c"); ok {
		t.Fatal("c is still registered")
	}
	counts := snap.Counts()
	if counts["a"]+counts["b"] != 16384 {
		t.Fatalf("owners after: %v", counts)
	}
	h, err := d.History(ctx, 1)
	if err != nil || len(h) != 1 || h[0].Kind != directory.ChangeNodeFail || !strings.Contains(h[0].Reason, "data lost: c declared failed by anonymous") {
		t.Fatalf("history %+v %v", h, err)
	}
	// The audit log has it too, in the change's own transaction.
	audit, err := d.Audit(ctx, directory.AuditQuery{Kind: directory.AuditNode, Limit: 1})
	if err != nil || len(audit) != 1 || audit[0].Action != directory.ChangeNodeFail || audit[0].Node != "c" || !strings.Contains(audit[0].Reason, "data lost: c declared failed") {
		t.Fatalf("audit %+v %v", audit, err)
	}
	// c comes back: it registers as a new node that owns nothing.
	if _, err := d.RegisterNode(ctx, directory.Node{ID: "c", Addr: "127.0.0.1:7003", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	snap, _ = d.Snapshot(ctx)
	if n := snap.Counts()["c"]; n != 0 {
		t.Fatalf("c came back owning %d slots", n)
	}
}
