package main

import (
	"testing"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/slots"
)

// TestGoldenAgainstSlotd checks the table and JSON output of the commands
// that read the cluster, against a real slotd over a real etcd, after a
// scripted sequence of changes. Timestamps are elided; everything else is
// deterministic (the ring, plan ids, versions).
func TestGoldenAgainstSlotd(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	s.ok(t, "nodes", "add", "n4=127.0.0.1:7504,zone=b")
	s.ok(t, "nodes", "weight", "n1", "2")
	s.ok(t, "throttle", "64MiB/s")
	s.settle(t)

	steps := []struct {
		name string
		args []string
	}{
		{"status", []string{"status"}},
		{"nodes_list", []string{"nodes", "list"}},
		{"plan", []string{"plan", "--drain", "n2", "--max-moves", "12", "--reason", "golden"}},
		{"history", []string{"history", "--limit", "6"}},
		{"throttle", []string{"throttle"}},
		{"lookup", []string{"lookup", "user:42", "--slot", "0"}},
	}
	for _, st := range steps {
		for _, form := range []string{"table", "json"} {
			t.Run(st.name+"_"+form, func(t *testing.T) {
				out := s.ok(t, append([]string{"-o", form}, st.args...)...)
				golden(t, st.name+"_"+form+".golden", elideTimes(out))
			})
		}
	}

	// With a plan applying (no mover here, so it stays at 0 done).
	var p struct{ ID string }
	decode(t, s.ok(t, "plan", "--max-moves", "3", "-o", "json"), &p)
	s.ok(t, "apply", p.ID)
	for _, form := range []string{"table", "json"} {
		t.Run("status_applying_"+form, func(t *testing.T) {
			golden(t, "status_applying_"+form+".golden", elideTimes(s.ok(t, "-o", form, "status")))
		})
	}

	// The balancer on, then frozen (no mover, so it never decides): the
	// policy's time is elided as the others.
	s.ok(t, "auto", "on", "--reason", "golden")
	s.ok(t, "auto", "freeze", "--reason", "golden freeze")
	for _, form := range []string{"table", "json"} {
		t.Run("status_frozen_"+form, func(t *testing.T) {
			golden(t, "status_frozen_"+form+".golden", elideTimes(s.ok(t, "-o", form, "status")))
		})
	}
}

// TestMapGolden prints a small hand-made map: the ring's real maps have
// thousands of ranges.
func TestMapGolden(t *testing.T) {
	owners := make([]string, slots.Count)
	for i := range owners {
		switch {
		case i < 5000:
			owners[i] = "n1"
		case i < 5010 || i >= 12000:
			owners[i] = "n2"
		default:
			owners[i] = "n3"
		}
	}
	owners[7] = "n3"
	m, err := slotmap.New(slotmap.Snapshot{
		Version: 42, ClusterID: "demo", Owners: owners,
		Nodes: []slotmap.Node{
			{ID: "n1", Addr: "127.0.0.1:7501", Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE},
			{ID: "n2", Addr: "127.0.0.1:7502", Zone: "b", Weight: 1, State: slotdv1.NodeState_NODE_STATE_DRAINING},
			{ID: "n3", Addr: "127.0.0.1:7503", Weight: 2, State: slotdv1.NodeState_NODE_STATE_ACTIVE},
		},
		Migrations: []slotmap.Migration{{Slot: slots.MustNew(12000), From: "n2", To: "n3", Phase: slotdv1.MovePhase_MOVE_PHASE_COPYING, MoveID: "mv-1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, output, node string
	}{
		{"map_table.golden", "table", ""},
		{"map_json.golden", "json", ""},
		{"map_node_table.golden", "table", "n3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, g := capture(tc.output)
			if err := g.printMap(m, tc.node); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, out.String())
		})
	}
}
