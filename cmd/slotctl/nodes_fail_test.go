package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/server/servertest"
)

// TestNodesFail: slotctl nodes fail refuses without --accept-data-loss,
// previews with --dry-run, and with --yes gives the node's slots to the
// others, empty, in one version.
func TestNodesFail(t *testing.T) {
	sd := servertest.Start(t, func(c *server.Config) {
		c.DisableMover, c.DownAfter, c.HoldDown = true, time.Second, time.Millisecond
	})
	s := &testSlotd{addr: sd.Addr()}
	s.demo(t)
	d, err := directory.New(directory.Config{Client: sd.Etcd().NewClient(t), DownAfter: time.Second, HoldDown: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// n1 and n2 heartbeat; n3 never does: the liveness pass marks it down.
	ctx, stop := context.WithCancel(context.Background())
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		for ctx.Err() == nil {
			_ = d.Touch(ctx, "n1")
			_ = d.Touch(ctx, "n2")
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stop(); <-beats })

	if r := s.run(t, "", "nodes", "fail", "n3"); r.code != exitUsage || !strings.Contains(r.stderr, "--accept-data-loss") {
		t.Fatalf("without --accept-data-loss: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := s.run(t, "", "nodes", "fail", "n1", "--dry-run"); r.code != exitRefused {
		t.Fatalf("an active node: exit %d, stderr %q", r.code, r.stderr)
	}
	eventually(t, "n3 marked down", func() bool {
		if _, err := d.CheckLiveness(context.Background()); err != nil {
			return false
		}
		snap, err := d.Snapshot(context.Background())
		n, _ := snap.Node("n3")
		return err == nil && n.Down
	})
	preview := s.ok(t, "nodes", "fail", "n3", "--dry-run")
	if !strings.Contains(preview, "LOSES ITS DATA") || !strings.Contains(preview, "bytes lost:  unknown") {
		t.Fatalf("preview:\n%s", preview)
	}
	if r := s.run(t, "", "nodes", "fail", "n3", "--accept-data-loss"); r.code != exitUsage {
		t.Fatalf("no terminal, no --yes: exit %d", r.code)
	}
	out := s.ok(t, "nodes", "fail", "n3", "--accept-data-loss", "--yes", "--reason", "disk gone", "-o", "json")
	var got nodeFailJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !got.Applied || got.Node != "n3" || got.NewOwners["n1"]+got.NewOwners["n2"] != got.SlotCount || got.SlotCount == 0 || got.BytesLost != nil {
		t.Fatalf("result %+v", got)
	}
	hist := s.ok(t, "history", "--limit", "1")
	if !strings.Contains(hist, "data lost: n3 declared failed by tester") {
		t.Fatalf("history:\n%s", hist)
	}
}
