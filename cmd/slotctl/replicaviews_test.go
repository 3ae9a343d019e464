package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/clusterstatus"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// rf3 bootstraps six nodes, two in each of three zones, at rf 3 and
// min_isr 2; it returns the directory behind s.
func (s *testSlotd) rf3(t *testing.T) *directory.Directory {
	t.Helper()
	args := []string{"init", "--rf", "3", "--min-isr", "2", "--vnodes", "8"}
	for i, z := range []string{"a", "a", "b", "b", "c", "c"} {
		args = append(args, "--node", "n"+string(rune('1'+i))+"=127.0.0.1:750"+string(rune('1'+i))+",zone="+z)
	}
	s.ok(t, args...)
	return s.srv.Directory(t)
}

// shrink turns an in-sync follower of slot into a learner, as a lagging
// follower is; it returns the follower.
func shrink(t *testing.T, d *directory.Directory, slot int) string {
	t.Helper()
	ctx := context.Background()
	snap, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set := snap.Replicas(slots.MustNew(slot))
	if _, _, err := d.ChangeReplicas(ctx, directory.ReplicaChange{Slot: set.Slot, Step: directory.StepShrinkISR,
		Node: set.ISR[2], ExpectEpoch: set.Epoch, By: "test"}); err != nil {
		t.Fatal(err)
	}
	return set.ISR[2]
}

// TestStatusReplication: slotctl status shows rf, min isr, the zones, the
// under-replicated slots and the zone spread of six nodes in three zones
// at rf 3, in JSON and in its table, before and after a follower of one
// slot falls out of its ISR.
func TestStatusReplication(t *testing.T) {
	s := startSlotd(t, false)
	d := s.rf3(t)
	status := func() statusJSON {
		var st statusJSON
		decode(t, s.ok(t, "status", "-o", "json"), &st)
		return st
	}
	want := clusterstatus.Replication{RF: 3, MinISR: 2, Zones: []string{"a", "b", "c"}, ZoneSpread: []clusterstatus.ZoneSpread{{Zones: 3, Slots: slots.Count}}}
	st := status()
	if r := st.Replication; r == nil || !equalReplication(*r, want) {
		t.Fatalf("replication %+v, want %+v", r, want)
	}
	var primaries, replicas uint32
	for _, n := range st.Nodes {
		if n.Replicas == nil || n.Replicas.Primaries != n.Slots {
			t.Fatalf("%s: replicas %+v with %d slots", n.ID, n.Replicas, n.Slots)
		}
		primaries += n.Replicas.Primaries
		replicas += n.Replicas.Primaries + n.Replicas.Followers + n.Replicas.Learners
	}
	if primaries != slots.Count || replicas != 3*slots.Count {
		t.Fatalf("%d primaries and %d replicas over the nodes, want %d and %d", primaries, replicas, slots.Count, 3*slots.Count)
	}
	table := s.ok(t, "status")
	for _, line := range []string{"replication: rf 3, min isr 2, zones a, b, c",
		"replica sets: 0 under-replicated, 0 below min isr, 0 filling, 0 zone violations; 16384 slots in 3 zones"} {
		if !strings.Contains(table, line+"\n") {
			t.Fatalf("status lacks %q:\n%s", line, table)
		}
	}

	shrink(t, d, 4000)
	want.UnderReplicated, want.WithLearners = 1, 1
	if r := status().Replication; r == nil || !equalReplication(*r, want) {
		t.Fatalf("after a shrink: replication %+v, want %+v", r, want)
	}
	if table := s.ok(t, "status"); !strings.Contains(table, "replica sets: 1 under-replicated, 0 below min isr, 1 filling, 0 zone violations") {
		t.Fatalf("status after a shrink:\n%s", table)
	}
}

func equalReplication(a, b clusterstatus.Replication) bool {
	return a.RF == b.RF && a.MinISR == b.MinISR && slices.Equal(a.Zones, b.Zones) && a.UnderReplicated == b.UnderReplicated &&
		a.BelowMinISR == b.BelowMinISR && a.WithLearners == b.WithLearners && a.ZoneViolations == b.ZoneViolations &&
		slices.Equal(a.ZoneSpread, b.ZoneSpread)
}

// TestMapReplicas: slotctl map --replicas lists every slot's replicas as
// the directory holds them, in ranges; --under-replicated keeps the slot
// whose follower fell out of its ISR, --node the ranges a node holds; bad
// input is refused with one line and the exit code of its kind.
func TestMapReplicas(t *testing.T) {
	s := startSlotd(t, false)
	if r := s.run(t, "", "map", "--replicas"); r.code != exitRefused || !strings.Contains(r.stderr, "slotctl init") {
		t.Fatalf("map --replicas before the bootstrap: exit %d, stderr %q", r.code, r.stderr)
	}
	d := s.rf3(t)
	const slot = 9000
	learner := shrink(t, d, slot)
	snap, err := d.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	zone := map[string]string{}
	for _, n := range snap.Nodes {
		zone[n.ID] = n.Zone
	}

	var all mapReplicasJSON
	decode(t, s.ok(t, "map", "--replicas", "-o", "json"), &all)
	if all.Version != snap.Version || all.RF != 3 || all.MinISR != 2 {
		t.Fatalf("map --replicas: version %d rf %d min isr %d, want %d, 3, 2", all.Version, all.RF, all.MinISR, snap.Version)
	}
	next := uint32(0)
	for _, r := range all.Ranges {
		if r.From != next || r.Count != r.To-r.From+1 {
			t.Fatalf("range %+v after slot %d", r, next)
		}
		for _, sl := range []uint32{r.From, r.To} {
			set := snap.Replicas(slots.MustNew(int(sl)))
			if r.Primary != set.Primary() || !slices.Equal(r.ISR, set.ISR) || !slices.Equal(r.Learners, orEmpty(set.Learners)) {
				t.Fatalf("range %s: %+v, but slot %d has %+v", r.Slots, r, sl, set)
			}
		}
		var zones []string
		for _, id := range append(slices.Clone(r.ISR), r.Learners...) {
			zones = append(zones, zone[id])
		}
		slices.Sort(zones)
		wantState := "ok"
		if r.From == slot {
			wantState = "under-replicated"
		}
		if !slices.Equal(r.Zones, zones) || len(zones) != 3 || r.State != wantState {
			t.Fatalf("range %s: zones %v state %s, want %v and %s", r.Slots, r.Zones, r.State, zones, wantState)
		}
		next = r.To + 1
	}
	if next != slots.Count {
		t.Fatalf("ranges end at slot %d", next)
	}

	var nl nodesListJSON
	decode(t, s.ok(t, "nodes", "list", "-o", "json"), &nl)
	held := map[string]uint32{}
	for _, n := range nl.Nodes {
		if n.Replicas == nil || n.Replicas.Primaries != n.Slots {
			t.Fatalf("nodes list: %s holds %+v with %d slots", n.ID, n.Replicas, n.Slots)
		}
		held[n.ID] = n.Replicas.Primaries + n.Replicas.Followers + n.Replicas.Learners
	}
	cases := []struct {
		name  string
		args  []string
		slots uint32
		keep  func(replicaRangeJSON) bool
	}{
		{"under-replicated", []string{"--under-replicated"}, 1, func(r replicaRangeJSON) bool {
			return r.Slots == "9000" && r.State == "under-replicated" && slices.Equal(r.Learners, []string{learner}) && len(r.ISR) == 2
		}},
		{"a node's ranges", []string{"--node", "n1"}, held["n1"], func(r replicaRangeJSON) bool {
			return slices.Contains(r.ISR, "n1") || slices.Contains(r.Learners, "n1")
		}},
		{"the learner's ranges", []string{"--node", learner}, held[learner], func(r replicaRangeJSON) bool {
			return slices.Contains(r.ISR, learner) || slices.Contains(r.Learners, learner)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got mapReplicasJSON
			decode(t, s.ok(t, append([]string{"map", "--replicas", "-o", "json"}, tc.args...)...), &got)
			n := uint32(0)
			for _, r := range got.Ranges {
				if !tc.keep(r) {
					t.Fatalf("range %+v", r)
				}
				n += r.Count
			}
			if n != tc.slots || tc.slots == 0 || tc.slots == slots.Count {
				t.Fatalf("%d slots in the ranges, want %d (a part of them)", n, tc.slots)
			}
		})
	}

	table := s.ok(t, "map", "--replicas", "--under-replicated")
	row := strings.Fields(lineWith(t, table, "under-replicated"))
	if want := []string{"9000", "1", all.Ranges[0].Primary}; len(row) != 7 || row[0] != want[0] || row[1] != want[1] || row[4] != learner {
		t.Fatalf("map --replicas --under-replicated:\n%s", table)
	}
	if !strings.HasPrefix(table, "version ") || !strings.Contains(table, "SLOTS  COUNT  PRIMARY  ISR") {
		t.Fatalf("map --replicas table:\n%s", table)
	}
	for _, want := range []string{"NODE", "PRIMARIES", "FOLLOWERS", "LEARNERS"} {
		if !strings.Contains(s.ok(t, "nodes", "list"), want) {
			t.Fatalf("nodes list has no %s column", want)
		}
	}

	bad := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"map", "--under-replicated"}, exitUsage, "add --replicas"},
		{[]string{"map", "--replicas", "--summary"}, exitUsage, "replicas"},
		{[]string{"map", "--replicas", "--node", "nobody"}, exitFailure, `node "nobody" is not registered`},
	}
	for _, b := range bad {
		r := s.run(t, "", b.args...)
		if r.code != b.code || !strings.Contains(r.stderr, b.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || r.stdout != "" {
			t.Errorf("slotctl %v: exit %d, stderr %q; want exit %d, one line with %q", b.args, r.code, r.stderr, b.code, b.want)
		}
	}
}

// lineWith returns the one line of out that contains s.
func lineWith(t *testing.T, out, s string) string {
	t.Helper()
	var found []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d lines with %q in:\n%s", len(found), s, out)
	}
	return found[0]
}

// TestReplicaViewsHelpExamples runs every example in the help of the
// commands that show replica sets, as pasted, against a cluster at rf 3.
func TestReplicaViewsHelpExamples(t *testing.T) {
	s := startSlotd(t, false)
	s.rf3(t)
	root := newRootCmd(&globals{})
	for _, path := range [][]string{{"status"}, {"map"}, {"nodes", "list"}} {
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		examples := exampleLines(cmd)
		if len(examples) < 2 {
			t.Fatalf("slotctl %s has %d examples", strings.Join(path, " "), len(examples))
		}
		for _, ex := range examples {
			t.Run(ex, func(t *testing.T) {
				s.ok(t, strings.Fields(strings.TrimPrefix(ex, "slotctl "))...)
			})
		}
	}
}

// exampleLines returns the commands of cmd's Example, one a line.
func exampleLines(cmd *cobra.Command) []string {
	var out []string
	for _, l := range strings.Split(cmd.Example, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "slotctl ") {
			out = append(out, l)
		}
	}
	return out
}
