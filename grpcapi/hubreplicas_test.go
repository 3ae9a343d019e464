package grpcapi

import (
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

// sameSets fails unless map m holds the directory's replica set for every
// slot.
func sameSets(t *testing.T, m *slotmap.Map, snap *directory.Snapshot) {
	t.Helper()
	for i, want := range snap.ReplicaSets() {
		got := m.ReplicaSet(slots.MustNew(i))
		if got.Epoch != want.Epoch || !slices.Equal(got.ISR, want.ISR) || !slices.Equal(got.Learners, want.Learners) {
			t.Fatalf("version %d, slot %d: map has %+v, directory %+v", snap.Version, i, got, want)
		}
	}
}

// TestHubCarriesReplicaSets: at rf 1 the map and its deltas carry no
// replica field; each replica step on a slot reaches a watcher as a delta
// naming that slot's set alone (and its new owner for a primary
// transfer), and the map it makes holds every set the directory holds, as
// does a full map.
func TestHubCarriesReplicaSets(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	_, err := d.Bootstrap(testCtx(t), []directory.Node{
		{ID: "a", Addr: "127.0.0.1:7001", Zone: "z1", Weight: 1},
		{ID: "b", Addr: "127.0.0.1:7002", Zone: "z2", Weight: 1},
		{ID: "c", Addr: "127.0.0.1:7003", Zone: "z3", Weight: 1},
	}, 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, d, "127.0.0.1:0", nil)
	dc := slotdv1.NewDirectoryClient(dial(t, srv.addr()))
	stream, err := dc.WatchMap(testCtx(t), &slotdv1.WatchMapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetFull() == nil {
		t.Fatalf("first update %v, %v; want a full map", first, err)
	}
	if len(first.GetFull().GetReplicas()) != 0 {
		t.Fatal("a full map at rf 1 carries replica sets")
	}
	m, err := slotmap.FromProto(first.GetFull())
	if err != nil {
		t.Fatal(err)
	}
	// next reads updates until the map reaches version v and returns the
	// last delta.
	next := func(v uint64) *slotdv1.MapDelta {
		t.Helper()
		var last *slotdv1.MapDelta
		for m.Version() < v {
			u, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if last = u.GetDelta(); last == nil {
				t.Fatalf("update at %d is not a delta", m.Version())
			}
			if m, err = m.Apply(last); err != nil {
				t.Fatal(err)
			}
		}
		return last
	}

	s := slots.MustNew(4242)
	if dl := next(moveSlot(t, d, s.Int(), otherThan(t, d, s.Int()))); len(dl.GetReplicas()) != 0 {
		t.Fatalf("a move at rf 1 sends replica sets %v", dl.GetReplicas())
	}
	if m.HasReplicas() {
		t.Fatal("a map at rf 1 has replica sets")
	}

	snap, err := d.Snapshot(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	owner := snap.Owner(s)
	var others []string
	for _, n := range []string{"a", "b", "c"} {
		if n != owner {
			others = append(others, n)
		}
	}
	steps := []struct {
		step directory.ReplicaStep
		node string
	}{
		{directory.StepAddLearner, others[0]},
		{directory.StepJoinISR, others[0]},
		{directory.StepAddLearner, others[1]},
		{directory.StepTransferPrimary, others[0]},
		{directory.StepRemoveReplica, owner},
		{directory.StepRemoveReplica, others[1]},
	}
	for _, st := range steps {
		t.Run(fmt.Sprintf("%s %s", st.step, st.node), func(t *testing.T) {
			cur := snap.Replicas(s)
			set, v, err := d.ChangeReplicas(testCtx(t), directory.ReplicaChange{Slot: s, Step: st.step, Node: st.node, ExpectEpoch: cur.Epoch, By: "test"})
			if err != nil {
				t.Fatal(err)
			}
			dl := next(v)
			if r := dl.GetReplicas(); len(r) != 1 || r[0].GetSlot() != uint32(s.Int()) || r[0].GetEpoch() != set.Epoch ||
				!slices.Equal(r[0].GetFollowers(), set.ISR[1:]) || !slices.Equal(r[0].GetLearners(), set.Learners) {
				t.Fatalf("delta carries %v; want slot %d's set %+v alone", r, s.Int(), set)
			}
			wantOwners := 0
			if set.Primary() != cur.Primary() {
				wantOwners = 1
			}
			if len(dl.GetSlots()) != wantOwners {
				t.Fatalf("delta carries %d owners, want %d", len(dl.GetSlots()), wantOwners)
			}
			if snap, err = d.Snapshot(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			sameSets(t, m, snap)
			if m.OwnerID(s) != set.Primary() {
				t.Fatalf("owner %s, want the primary %s", m.OwnerID(s), set.Primary())
			}
		})
	}
	full, err := dc.GetMap(testCtx(t), &slotdv1.GetMapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	fm, err := slotmap.FromProto(full.GetMap())
	if err != nil || !fm.Equal(m) {
		t.Fatalf("the full map differs from the one the deltas made (%v)", err)
	}
}

// TestHubFullMapAtRF3: a directory bootstrapped at rf 3 serves a full map
// holding every slot's set, and its size is what clients download.
func TestHubFullMapAtRF3(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	ac := slotdv1.NewAdminClient(dial(t, startServer(t, d, "127.0.0.1:0", nil).addr()))
	nodes := zoned("a", "b", "c", "a", "b", "c", "a", "b", "c")
	if _, err := ac.Bootstrap(testCtx(t), &slotdv1.BootstrapRequest{Nodes: nodes, Replication: &slotdv1.ReplicationPolicy{Rf: 3, MinIsr: 2}}); err != nil {
		t.Fatal(err)
	}
	snap, err := d.Snapshot(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	m, err := mapOf(snap, "test")
	if err != nil {
		t.Fatal(err)
	}
	pb := m.Proto()
	back, err := slotmap.FromProto(pb)
	if err != nil || !back.Equal(m) {
		t.Fatalf("round trip: %v", err)
	}
	sameSets(t, back, snap)
	t.Logf("full map, 9 nodes at rf 3: %d bytes, of which replica sets %d", proto.Size(pb), len(pb.GetReplicas()))
}

// BenchmarkHubVersion is what the hub does per directory version (publish:
// the map from the snapshot, the delta from the previous map, the full
// encoding): at rf 1 for a move's commit (no replica sets, as before them),
// and at rf 3 over 9 nodes in 3 zones for a step that adds a learner to
// one slot (every slot has a stored set).
func BenchmarkHubVersion(b *testing.B) {
	for _, rf := range []uint32{1, 3} {
		b.Run(fmt.Sprintf("rf=%d", rf), func(b *testing.B) {
			d := newDir(b, etcdtest.New(b))
			ac := slotdv1.NewAdminClient(dial(b, startServer(b, d, "127.0.0.1:0", nil).addr()))
			nodes := zoned("a", "b", "c", "a", "b", "c", "a", "b", "c")
			if _, err := ac.Bootstrap(testCtx(b), &slotdv1.BootstrapRequest{Nodes: nodes, Replication: &slotdv1.ReplicationPolicy{Rf: rf, MinIsr: 1}}); err != nil {
				b.Fatal(err)
			}
			s := slots.MustNew(7)
			snapshot := func() *directory.Snapshot {
				snap, err := d.Snapshot(testCtx(b))
				if err != nil {
					b.Fatal(err)
				}
				return snap
			}
			change := func(step directory.ReplicaStep, node string) {
				if _, _, err := d.ChangeReplicas(testCtx(b), directory.ReplicaChange{Slot: s, Step: step, Node: node, ExpectEpoch: snapshot().Replicas(s).Epoch, By: "bench"}); err != nil {
					b.Fatal(err)
				}
			}
			var learner string
			if rf == 3 {
				// Every zone holds a replica: free one for the learner.
				learner = snapshot().Replicas(s).ISR[2]
				change(directory.StepRemoveReplica, learner)
			}
			prev := snapshot()
			if rf == 1 {
				moveSlot(b, d, s.Int(), slices.DeleteFunc([]string{"n0", "n1"}, func(id string) bool { return id == prev.Owner(s) })[0])
			} else {
				change(directory.StepAddLearner, learner)
			}
			cur := snapshot()
			pm, err := mapOf(prev, "bench")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var size, dsize int
			for b.Loop() {
				m, err := mapOf(cur, "bench")
				if err != nil {
					b.Fatal(err)
				}
				dsize = proto.Size(slotmap.Diff(pm, m))
				size = proto.Size(m.Proto())
			}
			b.ReportMetric(float64(size), "map-bytes")
			b.ReportMetric(float64(dsize), "delta-bytes")
		})
	}
}
