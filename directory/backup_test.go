package directory

import (
	"errors"
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

// TestBackupRestoreRoundTrip saves a directory with a committed move, a
// move in flight, a drained node, a plan and a throttle, restores it into
// a fresh etcd under another prefix, and finds the same table at a version
// past the saved one, with its cluster id, history and plan, and no
// liveness of the old cluster.
func TestBackupRestoreRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	_, d, snap := setup(t, 3, nil)
	if _, err := d.ClusterID(ctx, "cluster-1"); err != nil {
		t.Fatal(err)
	}
	s0 := slots.MustNew(ownerSlot(t, snap, "n0"))
	mv, err := d.BeginMove(ctx, MoveSpec{Slot: s0, From: "n0", To: "n1", Reason: "test", By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.AdvanceMove(ctx, s0, mv.MoveID, PhaseFenced); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CommitMove(ctx, s0, mv.MoveID, "test"); err != nil {
		t.Fatal(err)
	}
	s1 := slots.MustNew(ownerSlot(t, snap, "n2"))
	if _, err := d.BeginMove(ctx, MoveSpec{Slot: s1, From: "n2", To: "n0", Reason: "in flight", By: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Drain(ctx, "n2", "test", "test"); err != nil {
		t.Fatal(err)
	}
	if err := d.PutPlan(ctx, "p1", []byte(`{"id":"p1"}`)); err != nil {
		t.Fatal(err)
	}
	if err := d.SetThrottle(ctx, 12345); err != nil {
		t.Fatal(err)
	}
	if err := d.Touch(ctx, "n0"); err != nil {
		t.Fatal(err)
	}
	saved, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Backup(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Version != saved.Version || b.ClusterID != "cluster-1" || b.Schema != SchemaVersion {
		t.Fatalf("backup at version %d cluster %q schema %d; table at %d", b.Version, b.ClusterID, b.Schema, saved.Version)
	}
	for _, k := range b.Keys {
		if ephemeral(k.Key) {
			t.Fatalf("backup holds %s", k.Key)
		}
	}
	doc, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseBackup(doc)
	if err != nil {
		t.Fatal(err)
	}

	// A fresh etcd, another prefix.
	e2 := etcdtest.New(t)
	r, err := New(Config{Client: e2.Client(), Prefix: "/restored/"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := r.Restore(ctx, parsed, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v != saved.Version+DefaultVersionMargin {
		t.Fatalf("restored at %d, want %d", v, saved.Version+DefaultVersionMargin)
	}
	got, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != v || !slices.Equal(got.Owners(), saved.Owners()) || len(got.Moves) != 1 || got.Moves[0].Slot != s1 {
		t.Fatalf("restored table: version %d, moves %v", got.Version, got.Moves)
	}
	for _, n := range saved.Nodes {
		rn, ok := got.Node(n.ID)
		if !ok || rn.Weight != n.Weight || rn.Draining != n.Draining || rn.Addr != n.Addr {
			t.Fatalf("node %s: saved %+v restored %+v", n.ID, n, rn)
		}
	}
	if id, err := r.ClusterID(ctx, "other"); err != nil || id != "cluster-1" {
		t.Fatalf("restored cluster id %q %v", id, err)
	}
	if p, err := r.Plan(ctx, "p1"); err != nil || string(p) != `{"id":"p1"}` {
		t.Fatalf("plan %q %v", p, err)
	}
	if rate, ok, err := r.Throttle(ctx); err != nil || !ok || rate != 12345 {
		t.Fatalf("throttle %d %v %v", rate, ok, err)
	}
	h, err := r.History(ctx, 0)
	if err != nil || len(h) == 0 || h[len(h)-1].Version != saved.Version {
		t.Fatalf("history %d entries, %v", len(h), err)
	}
	resp, err := e2.Client().Get(ctx, "/restored/alive/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("liveness restored: %v %v", resp, err)
	}
	// The restored directory takes changes on top of the restored version.
	if _, err := r.Undrain(ctx, "n2", "test", "test"); err != nil {
		t.Fatal(err)
	}
	if after, _ := r.Version(ctx); after != v+1 {
		t.Fatalf("after a change: %d, want %d", after, v+1)
	}

	// A prefix that holds keys is refused without Force, replaced with it;
	// a running slotd's election key refuses even Force.
	if _, err := r.Restore(ctx, parsed, RestoreOptions{}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("restore over a directory: %v, want ErrNotEmpty", err)
	}
	if _, err := r.Restore(ctx, parsed, RestoreOptions{Force: true, VersionMargin: 5}); err != nil {
		t.Fatalf("forced restore: %v", err)
	}
	if got, _ := r.Snapshot(ctx); got.Version != saved.Version+5 || len(got.Moves) != 1 {
		t.Fatalf("forced restore: version %d", got.Version)
	}
	if _, err := e2.Client().Put(ctx, r.LeaderElectionPrefix()+"x", "slotd-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Restore(ctx, parsed, RestoreOptions{Force: true}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("restore under a running slotd: %v, want ErrNotEmpty", err)
	}

	// History is bounded as asked; a document that is not a backup is refused.
	short, err := d.Backup(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range short.Keys {
		if len(k.Key) > 8 && k.Key[:8] == "history/" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d history entries, want 2", n)
	}
	for _, bad := range []string{`{}`, `nope`, `{"format":"slotd-directory-backup/1","schema":1,"keys":[{"k":"alive/n1","v":""}]}`} {
		if _, err := ParseBackup([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("ParseBackup(%s) = %v, want ErrInvalid", bad, err)
		}
	}
}
