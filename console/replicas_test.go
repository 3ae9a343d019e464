package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/server/servertest"
	"github.com/slotd/slotd/slots"
)

// rf3 is a slotd serving the console, bootstrapped at rf 3 and min_isr 2
// over nodes n1-n3 in zones a, b, c (no stores: nothing moves), with one
// slot whose follower fell out of its ISR.
type rf3 struct {
	slotd   *servertest.Slotd
	base    string
	slot    int    // the under-replicated slot
	learner string // its follower turned learner
	snap    *directory.Snapshot
	zones   map[string]string
}

func startRF3(t *testing.T) *rf3 {
	t.Helper()
	s := servertest.Start(t, func(c *server.Config) { c.HTTP, c.DisableMover = "127.0.0.1:0", true })
	admin := slotdv1.NewAdminClient(s.Dial(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := &rf3{slotd: s, base: "http://" + s.HTTPAddr(), slot: 5000, zones: map[string]string{"n1": "a", "n2": "b", "n3": "c"}}
	req := &slotdv1.BootstrapRequest{Vnodes: 16, Operator: "test", Replication: &slotdv1.ReplicationPolicy{Rf: 3, MinIsr: 2}}
	for i, id := range []string{"n1", "n2", "n3"} {
		req.Nodes = append(req.Nodes, &slotdv1.Node{Id: id, Address: fmt.Sprintf("127.0.0.1:%d", 7601+i), Zone: r.zones[id], Weight: 1})
	}
	if _, err := admin.Bootstrap(ctx, req); err != nil {
		t.Fatal(err)
	}
	d := s.Directory(t)
	snap, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set := snap.Replicas(slots.MustNew(r.slot))
	r.learner = set.ISR[2]
	if _, _, err := d.ChangeReplicas(ctx, directory.ReplicaChange{Slot: set.Slot, Step: directory.StepShrinkISR, Node: r.learner,
		ExpectEpoch: set.Epoch, By: "test"}); err != nil {
		t.Fatal(err)
	}
	if r.snap, err = d.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// replicasAPI is GET /api/v1/replicas as the page reads it.
type replicasAPI struct {
	Version  uint64            `json:"version"`
	RF       uint32            `json:"rf"`
	MinISR   uint32            `json:"min_isr"`
	Nodes    []string          `json:"nodes"`
	Zones    []string          `json:"zones"`
	ISR      [][]int           `json:"isr"`
	Learners map[string][]int  `json:"learners"`
	States   map[string]string `json:"states"`
}

// TestReplicasJSON: the console's JSON at rf 3 over three zones: every
// slot's ISR and learners as the directory holds them, the one
// under-replicated slot's state, the zones of the map's nodes, the
// status's replication and every node's replicas; the replicas answer
// 304 to its ETag while nothing changes.
func TestReplicasJSON(t *testing.T) {
	c := startRF3(t)
	var r replicasAPI
	var etag string
	waitfor.True(t, 30*time.Second, "the replicas at the directory's version", func() bool {
		resp, body := get(t, noRedirect, c.base+"/api/v1/replicas")
		if err := json.Unmarshal(body, &r); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("replicas: %s %v: %s", resp.Status, err, body)
		}
		etag = resp.Header.Get("ETag")
		return r.Version >= c.snap.Version
	})
	if r.RF != 3 || r.MinISR != 2 || !slices.Equal(r.Nodes, []string{"n1", "n2", "n3"}) || !slices.Equal(r.Zones, []string{"a", "b", "c"}) || len(r.ISR) != slots.Count {
		t.Fatalf("replicas: rf %d min isr %d nodes %v zones %v, %d slots", r.RF, r.MinISR, r.Nodes, r.Zones, len(r.ISR))
	}
	names := func(l []int) []string {
		var out []string
		for _, i := range l {
			out = append(out, r.Nodes[i])
		}
		return out
	}
	for s := range slots.Count {
		set := c.snap.Replicas(slots.MustNew(s))
		key := strconv.Itoa(s)
		if !slices.Equal(names(r.ISR[s]), set.ISR) || !slices.Equal(names(r.Learners[key]), set.Learners) {
			t.Fatalf("slot %d: isr %v learners %v, the directory holds %+v", s, names(r.ISR[s]), names(r.Learners[key]), set)
		}
	}
	if len(r.States) != 1 || r.States[strconv.Itoa(c.slot)] != "under-replicated" || len(r.Learners) != 1 {
		t.Fatalf("states %v learners %v, want slot %d under-replicated with its learner", r.States, r.Learners, c.slot)
	}
	if resp, body := get(t, noRedirect, c.base+"/api/v1/replicas", "If-None-Match", etag); resp.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Fatalf("replicas with its ETag = %s (%d bytes)", resp.Status, len(body))
	}

	var m struct {
		Nodes []string `json:"nodes"`
		Zones []string `json:"zones"`
	}
	_, body := get(t, noRedirect, c.base+"/api/v1/map")
	if err := json.Unmarshal(body, &m); err != nil || !slices.Equal(m.Zones, []string{"a", "b", "c"}) {
		t.Fatalf("map: %v %s", err, body)
	}
	var st struct {
		Replication struct {
			RF              uint32 `json:"rf"`
			UnderReplicated uint32 `json:"under_replicated"`
			WithLearners    uint32 `json:"with_learners"`
			ZoneSpread      []struct {
				Zones, Slots uint32
			} `json:"zone_spread"`
		} `json:"replication"`
		Nodes []struct {
			ID       string `json:"id"`
			Zone     string `json:"zone"`
			Slots    uint32 `json:"slots"`
			Replicas struct {
				Primaries, Followers, Learners uint32
			} `json:"replicas"`
		} `json:"nodes"`
	}
	_, body = get(t, noRedirect, c.base+"/api/v1/status")
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	rp := st.Replication
	if rp.RF != 3 || rp.UnderReplicated != 1 || rp.WithLearners != 1 || len(rp.ZoneSpread) != 1 || rp.ZoneSpread[0].Slots != slots.Count {
		t.Fatalf("status replication: %s", body)
	}
	for _, n := range st.Nodes {
		h := n.Replicas
		learners := uint32(0)
		if n.ID == c.learner {
			learners = 1
		}
		if n.Zone != c.zones[n.ID] || h.Primaries != n.Slots || h.Learners != learners || h.Primaries+h.Followers+h.Learners != slots.Count {
			t.Fatalf("status node %s: %+v", n.ID, n)
		}
	}
}

// TestReplicaMetricsOnSlotd: slotd's /metrics, beside the console, exports
// the replica sets as the status counts them: the under-replicated slot,
// no zone violation, and every node's slots by role.
func TestReplicaMetricsOnSlotd(t *testing.T) {
	c := startRF3(t)
	sum := c.snap.ReplicaSummary()
	want := []string{"slotd_slots_under_replicated 1", "slotd_slots_below_min_isr 0", "slotd_zone_violations 0", "slotd_replication_factor 3"}
	for _, id := range []string{"n1", "n2", "n3"} {
		h := sum.Nodes[id]
		for i, v := range []int{h.Primaries, h.Followers, h.Learners} {
			want = append(want, fmt.Sprintf("slotd_node_replicas{node=%q,role=%q} %d", id, directory.Roles[i], v))
		}
	}
	_, body := get(t, noRedirect, c.base+"/metrics")
	lines := strings.Split(string(body), "\n")
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("/metrics has no line %q", w)
		}
	}
	if sum.Nodes[c.learner].Learners != 1 {
		t.Fatalf("%s holds %+v, want the learner of slot %d", c.learner, sum.Nodes[c.learner], c.slot)
	}
}
