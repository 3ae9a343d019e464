package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/internal/syncbuf"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/slots"
)

// runSlotd serves slotd in-process over etcd e on listen until stop.
func runSlotd(t *testing.T, e *etcdtest.Cluster, listen string) (stop func()) {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.EtcdEndpoints, cfg.Listen, cfg.HTTP, cfg.Name, cfg.DisableMover = e.Endpoints(), listen, "", "s-"+listen, true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancelRun := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancelRun()
		if err := <-done; err != nil {
			t.Errorf("slotd: %v", err)
		}
		s.Close()
	}
	t.Cleanup(stop)
	return stop
}

// TestBackupRestoreServesTheSavedMap: the directory is saved through the
// Recovery API, the cluster goes on a little and then loses its etcd;
// `slotd restore` writes the backup into a fresh etcd, and a slotd on it
// serves the saved map at a version past every one clients saw. An SDK
// client that followed the lost cluster takes it (same cluster id, newer
// version), and so does a store that registered after the backup.
func TestBackupRestoreServesTheSavedMap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e1, e2 := etcdtest.New(t), etcdtest.New(t)
	addrA, addrB := freeAddr(t), freeAddr(t)
	stopA := runSlotd(t, e1, addrA)
	conn, err := grpc.NewClient(addrA, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	admin := slotdv1.NewAdminClient(conn)
	nodes := []*slotdv1.Node{{Id: "n1", Address: "127.0.0.1:7501", Weight: 1}, {Id: "n2", Address: "127.0.0.1:7502", Weight: 1}}
	if _, err := admin.Bootstrap(ctx, &slotdv1.BootstrapRequest{Nodes: nodes, Vnodes: 8, Operator: "test"}); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(ctx, client.Options{Endpoints: []string{addrA, addrB}, ReconnectBackoff: 10 * time.Millisecond, MaxReconnectBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	saved := cl.Map()

	resp, err := slotdv1.NewRecoveryClient(conn).Backup(ctx, &slotdv1.BackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dir.json")
	if err := os.WriteFile(file, resp.GetDocument(), 0o600); err != nil {
		t.Fatal(err)
	}
	// The cluster goes on after the backup: the client and a store see
	// later versions than the saved one.
	for _, w := range []uint32{2, 3, 1} {
		if _, err := admin.SetWeight(ctx, &slotdv1.SetWeightRequest{NodeId: "n2", Weight: w, Operator: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.True(t, 20*time.Second, "client at the last version", func() bool { return cl.Map().Version() == resp.GetVersion()+3 })
	seen := cl.Map().Version()
	stopA() // etcd e1 is "lost" with it

	var out, errb *syncbuf.Buffer
	restore := func(extra ...string) int {
		args := append([]string{"restore", "--from", file, "--etcd-endpoints", strings.Join(e2.Endpoints(), ",")}, extra...)
		out, errb = new(syncbuf.Buffer), new(syncbuf.Buffer)
		return runContext(ctx, args, out, errb)
	}
	if code := restore(); code != exitOK || !strings.Contains(out.String(), "at version") {
		t.Fatalf("restore: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if code := restore(); code == exitOK || !strings.Contains(errb.String(), "--force") {
		t.Fatalf("restore over a restored directory: exit %d, stderr %q; want a refusal naming --force", code, errb.String())
	}
	if code := restore("--force", "--version-margin", "1000"); code != exitOK {
		t.Fatalf("restore --force: exit %d, stderr %q", code, errb.String())
	}
	if code := runContext(ctx, []string{"restore"}, out, errb); code != exitUsage {
		t.Fatalf("restore without --from: exit %d", code)
	}

	runSlotd(t, e2, addrB)
	want := resp.GetVersion() + directory.DefaultVersionMargin
	waitfor.True(t, 30*time.Second, "client following the restored cluster", func() bool { return cl.Map().Version() >= want })
	got := cl.Map()
	if got.ClusterID() != saved.ClusterID() || got.Version() < seen {
		t.Fatalf("restored map: cluster %q version %d; saved %q, client saw %d", got.ClusterID(), got.Version(), saved.ClusterID(), seen)
	}
	for i := range slots.Count {
		s := slots.MustNew(i)
		if got.OwnerID(s) != saved.OwnerID(s) {
			t.Fatalf("slot %d: restored owner %s, saved %s", i, got.OwnerID(s), saved.OwnerID(s))
		}
	}
	if n, _ := got.Node("n2"); n.Weight != 1 {
		t.Fatalf("n2 weight %d, want the saved 1", n.Weight)
	}

	// A store that registered after the backup (at version seen) serves
	// from the restored map.
	cm, err := node.NewClusterMap(client.Options{Endpoints: []string{addrB}})
	if err != nil {
		t.Fatal(err)
	}
	mctx, mcancel := context.WithCancel(ctx)
	mdone := make(chan error, 1)
	go func() { mdone <- cm.Run(mctx) }()
	defer func() { mcancel(); <-mdone }()
	waitfor.True(t, 20*time.Second, "store's map", func() bool { m := cm.Map(); return m != nil && m.Version() >= want })
	if m := cm.Map(); m.Version() < seen || !slices.Equal(ownerList(m.OwnerID), ownerList(saved.OwnerID)) {
		t.Fatalf("store's map at %d", m.Version())
	}
}

func ownerList(f func(slots.Slot) string) []string {
	out := make([]string, slots.Count)
	for i := range out {
		out[i] = f(slots.MustNew(i))
	}
	return out
}
