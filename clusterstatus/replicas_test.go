package clusterstatus

import (
	"encoding/json"
	"testing"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/load"
)

// TestBuildReplication: the status model's replication and every node's
// replicas, as slotctl status -o json prints them and the console shows
// them, from Admin.Status's replicas at each stage a cluster goes through.
func TestBuildReplication(t *testing.T) {
	active := slotdv1.NodeState_NODE_STATE_ACTIVE
	lines := []*slotdv1.NodeLoad{
		{Node: &slotdv1.Node{Id: "n2", Zone: "b", Weight: 1, State: active}, Slots: 6000},
		{Node: &slotdv1.Node{Id: "n1", Zone: "a", Weight: 1, State: active}, Slots: 5000},
		{Node: &slotdv1.Node{Id: "n3", Zone: "c", Weight: 1, State: active}, Slots: 5384},
	}
	policy := func(rf, minISR uint32) *slotdv1.ReplicationPolicy {
		return &slotdv1.ReplicationPolicy{Rf: rf, MinIsr: minISR}
	}
	held := func(p, f, l uint32) []uint32 { return []uint32{p, f, l} }
	nodes := func(counts ...[]uint32) []*slotdv1.NodeReplicas {
		var out []*slotdv1.NodeReplicas
		for i, c := range counts {
			out = append(out, &slotdv1.NodeReplicas{NodeId: []string{"n1", "n2", "n3"}[i], Primaries: c[0], Followers: c[1], Learners: c[2]})
		}
		return out
	}
	cases := []struct {
		name     string
		replicas *slotdv1.ReplicaStatus
		// want is the JSON of the status's replication, then of each
		// node's replicas in id order.
		want     string
		wantNode []string
	}{
		{
			name: "a slotd that does not report replica sets", replicas: nil,
			want: `null`, wantNode: []string{`null`, `null`, `null`},
		},
		{
			name: "before the bootstrap: the policy and zones", replicas: &slotdv1.ReplicaStatus{Policy: policy(3, 2), Zones: []string{"a", "b", "c"}},
			want:     `{"rf":3,"min_isr":2,"zones":["a","b","c"],"under_replicated":0,"below_min_isr":0,"with_learners":0,"zone_violations":0,"zone_spread":[]}`,
			wantNode: []string{`null`, `null`, `null`},
		},
		{
			name: "rf 1", replicas: &slotdv1.ReplicaStatus{Policy: policy(1, 1),
				ZoneSpread: []*slotdv1.ZoneSpread{{Zones: 1, Slots: 16384}}, Nodes: nodes(held(5000, 0, 0), held(6000, 0, 0), held(5384, 0, 0))},
			want:     `{"rf":1,"min_isr":1,"zones":[],"under_replicated":0,"below_min_isr":0,"with_learners":0,"zone_violations":0,"zone_spread":[{"zones":1,"slots":16384}]}`,
			wantNode: []string{`{"primaries":5000,"followers":0,"learners":0}`, `{"primaries":6000,"followers":0,"learners":0}`, `{"primaries":5384,"followers":0,"learners":0}`},
		},
		{
			name: "rf 3 in three zones, one slot shrunk to two in-sync replicas and a learner, one lost to its primary alone",
			replicas: &slotdv1.ReplicaStatus{Policy: policy(3, 2), Zones: []string{"a", "b", "c"},
				UnderReplicated: 2, BelowMinIsr: 1, WithLearners: 1,
				ZoneSpread: []*slotdv1.ZoneSpread{{Zones: 1, Slots: 1}, {Zones: 3, Slots: 16383}},
				Nodes:      nodes(held(5000, 11383, 0), held(6000, 10382, 1), held(5384, 10999, 0))},
			want: `{"rf":3,"min_isr":2,"zones":["a","b","c"],"under_replicated":2,"below_min_isr":1,"with_learners":1,"zone_violations":0,` +
				`"zone_spread":[{"zones":1,"slots":1},{"zones":3,"slots":16383}]}`,
			wantNode: []string{`{"primaries":5000,"followers":11383,"learners":0}`, `{"primaries":6000,"followers":10382,"learners":1}`,
				`{"primaries":5384,"followers":10999,"learners":0}`},
		},
		{
			name: "a zone violation is shown, never hidden",
			replicas: &slotdv1.ReplicaStatus{Policy: policy(2, 1), Zones: []string{"a"}, ZoneViolations: 16384,
				ZoneSpread: []*slotdv1.ZoneSpread{{Zones: 1, Slots: 16384}}, Nodes: nodes(held(5000, 0, 0), held(6000, 0, 0), held(5384, 16384, 0))},
			want:     `{"rf":2,"min_isr":1,"zones":["a"],"under_replicated":0,"below_min_isr":0,"with_learners":0,"zone_violations":16384,"zone_spread":[{"zones":1,"slots":16384}]}`,
			wantNode: []string{`{"primaries":5000,"followers":0,"learners":0}`, `{"primaries":6000,"followers":0,"learners":0}`, `{"primaries":5384,"followers":16384,"learners":0}`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Build(&slotdv1.StatusResponse{Nodes: lines, Replicas: tc.replicas}, nil, load.View{})
			if b := mustJSON(t, got.Replication); b != tc.want {
				t.Errorf("replication\n got %s\nwant %s", b, tc.want)
			}
			for i, n := range got.Nodes {
				if b := mustJSON(t, n.Replicas); b != tc.wantNode[i] {
					t.Errorf("%s's replicas: %s, want %s", n.ID, b, tc.wantNode[i])
				}
			}
			// What slotctl prints reads back as it was.
			var back Status
			if err := json.Unmarshal([]byte(mustJSON(t, got)), &back); err != nil || mustJSON(t, back.Replication) != tc.want {
				t.Errorf("round trip: %v, %s", err, mustJSON(t, back.Replication))
			}
		})
	}
}

func TestReplicaSetState(t *testing.T) {
	cases := []struct {
		r    *slotdv1.ReplicaRange
		want string
	}{
		{&slotdv1.ReplicaRange{}, "ok"},
		{&slotdv1.ReplicaRange{UnderReplicated: true}, "under-replicated"},
		{&slotdv1.ReplicaRange{UnderReplicated: true, BelowMinIsr: true}, "below-min-isr"},
		{&slotdv1.ReplicaRange{UnderReplicated: true, ZoneViolation: true}, "zone-violation"},
	}
	for _, tc := range cases {
		if got := ReplicaSetState(tc.r); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.r, got, tc.want)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
