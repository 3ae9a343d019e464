package grpcapi

import (
	"testing"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/slots"
)

// TestHubChangedSince: the slots whose owner changed after a version, from
// the hub's kept deltas, also for a version this hub never published (a
// delta spanning it counts whole), and not for one older than it keeps.
func TestHubChangedSince(t *testing.T) {
	owners := make([]string, slots.Count)
	for i := range owners {
		owners[i] = "a"
	}
	nodes := []slotmap.Node{{ID: "a", Addr: "x", Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE}, {ID: "b", Addr: "y", Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE}}
	h := &Hub{cfg: HubConfig{Keep: 3}}
	h.st.Store(&hubState{changed: make(chan struct{})})
	publish := func(v uint64, moved ...int) {
		for _, s := range moved {
			owners[s] = "b"
		}
		m, err := slotmap.New(slotmap.Snapshot{Version: v, ClusterID: "c", Nodes: nodes, Owners: append([]string(nil), owners...)})
		if err != nil {
			t.Fatal(err)
		}
		h.publish(m)
	}
	publish(10)
	publish(12, 1)    // 10 -> 12: version 11 never published here
	publish(13, 2, 3) // 12 -> 13
	publish(15, 4)    // 13 -> 15; Keep 3 drops version 10's entry
	for _, tc := range []struct {
		v    uint64
		want []int
		ok   bool
	}{
		{15, nil, true},
		{14, []int{4}, true},
		{13, []int{4}, true},
		{12, []int{2, 3, 4}, true},
		{11, []int{1, 2, 3, 4}, true},
		{10, []int{1, 2, 3, 4}, true},
		{9, nil, false},
	} {
		got, ok := h.ChangedSince(tc.v)
		var want slots.Set
		for _, s := range tc.want {
			want.Add(slots.MustNew(s))
		}
		if ok != tc.ok || (ok && got != want) {
			t.Errorf("ChangedSince(%d) = %v %v, want %v %v", tc.v, got.String(), ok, want.String(), tc.ok)
		}
	}
}
