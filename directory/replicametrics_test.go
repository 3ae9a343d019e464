package directory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

// TestReplicaCollector scrapes the replica metrics of a directory before
// its bootstrap (nothing), at rf 3 over three zones (every slot in three
// zones), and after a follower of one slot is shrunk out of its ISR (one
// slot under-replicated, the follower a learner of it).
func TestReplicaCollector(t *testing.T) {
	d := newDir(t, etcdtest.New(t), nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewReplicaCollector(d, 0, nil))
	if n := testutil.CollectAndCount(reg, "slotd_slots_under_replicated", "slotd_node_replicas"); n != 0 {
		t.Fatalf("%d replica series before the bootstrap, want none", n)
	}
	p := Replication{RF: 3, MinISR: 2}
	if _, _, err := d.SetReplication(testCtx(t), ReplicationSpec{RF: &p.RF, MinISR: &p.MinISR, By: "test"}); err != nil {
		t.Fatal(err)
	}
	snap, err := d.Bootstrap(testCtx(t), zonedNodes("a", "b", "c"), 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	// Every node holds every slot: one in three as primary.
	counts := snap.Counts()
	expect := func(under int, roles map[string][3]int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "# HELP slotd_slots_under_replicated Slots with fewer in-sync replicas than the replication factor (rf).\n"+
			"# TYPE slotd_slots_under_replicated gauge\nslotd_slots_under_replicated %d\n", under)
		b.WriteString("# HELP slotd_zone_violations Slots whose replicas do not sit in distinct zones (two in one zone, or one without a zone beside others); the directory refuses every change that makes one, so it stays 0.\n" +
			"# TYPE slotd_zone_violations gauge\nslotd_zone_violations 0\n")
		b.WriteString("# HELP slotd_node_replicas Slots each node holds, by role: primary, follower (in sync) or learner (being filled).\n# TYPE slotd_node_replicas gauge\n")
		for _, id := range []string{"n0", "n1", "n2"} {
			for i, role := range Roles {
				fmt.Fprintf(&b, "slotd_node_replicas{node=%q,role=%q} %d\n", id, role, roles[id][i])
			}
		}
		return b.String()
	}
	roles := map[string][3]int{}
	for _, id := range []string{"n0", "n1", "n2"} {
		roles[id] = [3]int{counts[id], slots.Count - counts[id], 0}
	}
	names := []string{"slotd_slots_under_replicated", "slotd_zone_violations", "slotd_node_replicas"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expect(0, roles)), names...); err != nil {
		t.Fatal(err)
	}

	s := stepper{t: t, d: d, slot: slots.MustNew(42)}
	set, _ := s.set()
	s.do(StepShrinkISR, set.ISR[2])
	r := roles[set.ISR[2]]
	r[1]--
	r[2]++
	roles[set.ISR[2]] = r
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expect(1, roles)), names...); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
