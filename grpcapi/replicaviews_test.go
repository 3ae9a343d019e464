package grpcapi

import (
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

// TestReplicaViews: Status carries the policy and zones before the
// bootstrap, and the sets' health, zone spread and every node's roles
// after it at rf 3 over three zones (two nodes in one); ListReplicaSets covers every slot
// once, in order, and its filters keep a node's ranges and the
// under-replicated ones; bad input is refused with the code that says why.
func TestReplicaViews(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	ac := slotdv1.NewAdminClient(dial(t, startServer(t, d, "127.0.0.1:0", nil).addr()))
	ctx := testCtx(t)

	if _, err := ac.ListReplicaSets(ctx, &slotdv1.ListReplicaSetsRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("ListReplicaSets before the bootstrap: %v, want FailedPrecondition", err)
	}
	if _, err := ac.SetReplication(ctx, &slotdv1.SetReplicationRequest{Rf: u32(3), MinIsr: u32(2), Operator: "t"}); err != nil {
		t.Fatal(err)
	}
	nodes := zoned("a", "b", "c", "c")
	for _, n := range nodes {
		if _, err := ac.RegisterNode(ctx, &slotdv1.RegisterNodeRequest{Node: n}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := ac.Status(ctx, &slotdv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := &slotdv1.ReplicaStatus{Policy: &slotdv1.ReplicationPolicy{Rf: 3, MinIsr: 2}, Zones: []string{"a", "b", "c"}}
	if !proto.Equal(st.GetReplicas(), want) {
		t.Fatalf("replicas before the bootstrap: %v, want %v", st.GetReplicas(), want)
	}

	if _, err := ac.Bootstrap(ctx, &slotdv1.BootstrapRequest{Nodes: nodes}); err != nil {
		t.Fatal(err)
	}
	snap, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const slot = 300
	set := snap.Replicas(slots.MustNew(slot))
	shrunk := set.ISR[2]
	if _, _, err := d.ChangeReplicas(ctx, directory.ReplicaChange{Slot: slots.MustNew(slot), Step: directory.StepShrinkISR, Node: shrunk, By: "t"}); err != nil {
		t.Fatal(err)
	}
	if st, err = ac.Status(ctx, &slotdv1.StatusRequest{}); err != nil {
		t.Fatal(err)
	}
	r := st.GetReplicas()
	if r.GetUnderReplicated() != 1 || r.GetBelowMinIsr() != 0 || r.GetWithLearners() != 1 || r.GetZoneViolations() != 0 {
		t.Fatalf("health after a shrink: %v", r)
	}
	if sp := r.GetZoneSpread(); len(sp) != 1 || sp[0].GetZones() != 3 || sp[0].GetSlots() != slots.Count {
		t.Fatalf("zone spread: %v, want every slot in 3 zones (the learner's included)", sp)
	}
	var primaries, replicas, learners uint32
	held := map[string]uint32{}
	for i, n := range r.GetNodes() {
		if n.GetNodeId() != st.GetNodes()[i].GetNode().GetId() || n.GetPrimaries() != st.GetNodes()[i].GetSlots() {
			t.Fatalf("node %d: %v, but its line is %v", i, n, st.GetNodes()[i])
		}
		held[n.GetNodeId()] = n.GetPrimaries() + n.GetFollowers() + n.GetLearners()
		primaries += n.GetPrimaries()
		replicas += held[n.GetNodeId()]
		learners += n.GetLearners()
	}
	if primaries != slots.Count || replicas != 3*slots.Count || learners != 1 {
		t.Fatalf("%d primaries, %d replicas, %d learners over the nodes, want %d, %d and 1", primaries, replicas, learners, slots.Count, 3*slots.Count)
	}

	all, err := ac.ListReplicaSets(ctx, &slotdv1.ListReplicaSetsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	next := uint32(0)
	for _, rg := range all.GetRanges() {
		if rg.GetFrom() != next || rg.GetTo() < rg.GetFrom() || len(rg.GetIsr())+len(rg.GetLearners()) != 3 ||
			!slices.Equal(rg.GetZones(), []string{"a", "b", "c"}) || rg.GetZoneViolation() || rg.GetUnderReplicated() != (rg.GetFrom() == slot) {
			t.Fatalf("range %v after slot %d", rg, next)
		}
		next = rg.GetTo() + 1
	}
	if next != slots.Count || all.GetVersion() != snap.Version+1 || all.GetPolicy().GetRf() != 3 {
		t.Fatalf("ranges end at %d at version %d, want every slot at %d", next, all.GetVersion(), snap.Version+1)
	}

	// n3 shares zone c with n2: each holds part of the slots.
	const part = "n3"
	if held[part] == 0 || held[part] == slots.Count {
		t.Fatalf("%s holds %d slots, want a part of them", part, held[part])
	}
	cases := []struct {
		name  string
		req   *slotdv1.ListReplicaSetsRequest
		want  func(*slotdv1.ReplicaRange) bool
		slots uint32
		code  codes.Code
	}{
		{"under-replicated only", &slotdv1.ListReplicaSetsRequest{UnderReplicatedOnly: true}, func(rg *slotdv1.ReplicaRange) bool {
			return rg.GetFrom() == slot && rg.GetTo() == slot && rg.GetUnderReplicated() && slices.Equal(rg.GetLearners(), []string{shrunk})
		}, 1, codes.OK},
		{"a node's ranges", &slotdv1.ListReplicaSetsRequest{NodeId: part}, func(rg *slotdv1.ReplicaRange) bool {
			return slices.Contains(rg.GetIsr(), part) || slices.Contains(rg.GetLearners(), part)
		}, held[part], codes.OK},
		{"an unknown node", &slotdv1.ListReplicaSetsRequest{NodeId: "nobody"}, nil, 0, codes.NotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ac.ListReplicaSets(ctx, tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("ListReplicaSets: %v, want %s", err, tc.code)
			}
			if tc.code != codes.OK {
				return
			}
			n := uint32(0)
			for _, rg := range got.GetRanges() {
				if !tc.want(rg) {
					t.Fatalf("range %v", rg)
				}
				n += rg.GetTo() - rg.GetFrom() + 1
			}
			if n != tc.slots {
				t.Fatalf("the ranges hold %d slots, want %d", n, tc.slots)
			}
		})
	}
}
