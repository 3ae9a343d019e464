package load

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slotd/slotd/api/slotdv1"
)

// TestMetrics: a known node has its load and ratios (n3 owns nothing: it
// is known empty); an unknown one only slotd_node_load_known 0, no zeros.
func TestMetrics(t *testing.T) {
	a := newAgg(t, testMap(t))
	// Reports are timed by the wall clock here: Collect reads time.Now.
	r := goodReport()
	r.Slots = r.Slots[:1]
	r.HotKeys = nil
	if err := a.Report(nowish(), r); err != nil {
		t.Fatal(err)
	}
	if err := a.Report(nowish(), &slotdv1.LoadReport{NodeId: "n2", Version: 10, Slots: []*slotdv1.SlotLoad{{Slot: 500, Keys: 30, Bytes: 3000, Reads_10M: 6}}}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP slotd_hot_slots Slots whose load alone exceeds their node's band (fair share times 1 + tolerance) in bytes or ops: moving them cannot fix their node.
# TYPE slotd_hot_slots gauge
slotd_hot_slots 2
# HELP slotd_node_load_known 1 while the node's load is known: its last report is live (it reported within three of its intervals), or it owns no slot; else 0.
# TYPE slotd_node_load_known gauge
slotd_node_load_known{node="n1"} 1
slotd_node_load_known{node="n2"} 1
slotd_node_load_known{node="n3"} 1
# HELP slotd_node_load_ratio A node's measured load over its fair share (its weight over the active known nodes' weight, times the cluster's total) per dimension (keys, bytes, ops): 1 is balanced. Absent while unknown.
# TYPE slotd_node_load_ratio gauge
slotd_node_load_ratio{dimension="bytes",node="n1"} 1
slotd_node_load_ratio{dimension="bytes",node="n2"} 3
slotd_node_load_ratio{dimension="bytes",node="n3"} 0
slotd_node_load_ratio{dimension="keys",node="n1"} 1
slotd_node_load_ratio{dimension="keys",node="n2"} 3
slotd_node_load_ratio{dimension="keys",node="n3"} 0
slotd_node_load_ratio{dimension="ops",node="n1"} 2
slotd_node_load_ratio{dimension="ops",node="n2"} 2
slotd_node_load_ratio{dimension="ops",node="n3"} 0
`
	if err := testutil.CollectAndCompare(a.Collector(), strings.NewReader(want), "slotd_hot_slots", "slotd_node_load_known", "slotd_node_load_ratio"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(a.Collector(), "slotd_node_load"); n != 15 {
		t.Fatalf("%d slotd_node_load series, want 5 dimensions x 3 known nodes", n)
	}

	// Known nodes holding nothing at all are balanced (ratio 1), not
	// without a ratio: the alert and the dashboard see them.
	b := newAgg(t, testMap(t))
	for _, id := range []string{"n1", "n2"} {
		if err := b.Report(nowish(), &slotdv1.LoadReport{NodeId: id, Version: 10}); err != nil {
			t.Fatal(err)
		}
	}
	if err := testutil.CollectAndCompare(b.Collector(), strings.NewReader(`
# HELP slotd_node_load_ratio A node's measured load over its fair share (its weight over the active known nodes' weight, times the cluster's total) per dimension (keys, bytes, ops): 1 is balanced. Absent while unknown.
# TYPE slotd_node_load_ratio gauge
slotd_node_load_ratio{dimension="bytes",node="n1"} 1
slotd_node_load_ratio{dimension="bytes",node="n2"} 1
slotd_node_load_ratio{dimension="bytes",node="n3"} 1
slotd_node_load_ratio{dimension="keys",node="n1"} 1
slotd_node_load_ratio{dimension="keys",node="n2"} 1
slotd_node_load_ratio{dimension="keys",node="n3"} 1
slotd_node_load_ratio{dimension="ops",node="n1"} 1
slotd_node_load_ratio{dimension="ops",node="n2"} 1
slotd_node_load_ratio{dimension="ops",node="n3"} 1
`), "slotd_node_load_ratio"); err != nil {
		t.Fatal(err)
	}
}
