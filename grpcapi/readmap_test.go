package grpcapi

import (
	"fmt"
	"sync"
	"testing"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/migrations"
	"github.com/slotd/slotd/slots"
)

// TestReadMapDuringBootstrap reads the map in a loop while the directory is
// bootstrapped: every map it returns at or past the bootstrap's version has
// every slot owned. readMap used to read the table, find none, then read the
// nodes: a bootstrap committing between the two reads gave an empty map
// stamped with the bootstrap's version, which a store then held until the
// next change (slotkv stayed NOT_SERVING). Each round is a fresh directory.
func TestReadMapDuringBootstrap(t *testing.T) {
	c := etcdtest.New(t)
	cli := c.NewClient(t)
	ctx := testCtx(t)
	for round := range 20 {
		d, err := directory.New(directory.Config{Client: cli, Prefix: fmt.Sprintf("/readmap%d/", round)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := migrations.Apply(ctx, d); err != nil {
			t.Fatal(err)
		}
		nodes := []directory.Node{{ID: "a", Addr: "127.0.0.1:7001", Weight: 1}}
		if _, err := d.RegisterNode(ctx, nodes[0]); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var bad error
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				m, err := readMap(ctx, d, "test")
				if err != nil {
					bad = err
					return
				}
				if m.OwnerID(slots.MustNew(0)) != "" {
					return // bootstrapped and seen as such
				}
				snap, err := d.Snapshot(ctx)
				if err == nil && m.Version() >= snap.Version {
					bad = fmt.Errorf("unassigned map at version %d, bootstrapped at %d", m.Version(), snap.Version)
					return
				}
			}
		}()
		_, err = d.Bootstrap(ctx, nodes, 0, "test")
		if err != nil {
			close(stop)
		}
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if bad != nil {
			t.Fatalf("round %d: %v", round, bad)
		}
	}
}
