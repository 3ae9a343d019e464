package clusterstatus

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/load"
)

func TestBuild(t *testing.T) {
	active := slotdv1.NodeState_NODE_STATE_ACTIVE
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &slotdv1.StatusResponse{Version: 12, Server: "s1", MoverLeader: "s1", Throttle: &slotdv1.Throttle{DefaultBytesPerSecond: 50},
		Nodes: []*slotdv1.NodeLoad{
			{Node: &slotdv1.Node{Id: "n2", Address: "b:1", Weight: 1, State: slotdv1.NodeState_NODE_STATE_DRAINING}, Slots: 10},
			{Node: &slotdv1.Node{Id: "n1", Address: "a:1", Zone: "z", Weight: 2, State: active}, Slots: 30, TargetSlots: 20, Load: 1.5},
		},
		InFlight: []*slotdv1.PlannedMove{{Id: "p.0", PlanId: "p", Slot: 7, From: "n2", To: "n1", Phase: slotdv1.MovePhase_MOVE_PHASE_CATCHING_UP,
			BytesCopied: 9, Bytes: 100, StartedAt: timestamppb.New(at)}},
		ActivePlan: &slotdv1.Plan{Id: "p", State: slotdv1.PlanState_PLAN_STATE_APPLYING},
	}
	infos := []*slotdv1.NodeInfo{
		{Node: &slotdv1.Node{Id: "n2"}, OrphanBytes: proto.Int64(4096), LastHeartbeat: timestamppb.New(at)},
		{Node: &slotdv1.Node{Id: "n1"}, LeaseExpires: timestamppb.New(at)},
	}
	lv := load.View{
		Nodes: []load.NodeView{
			{ID: "n1", Weight: 2, State: active, Known: true, Received: at, Keys: 5, Bytes: 200, Reads10m: 3, Writes10m: 1, FairKeys: 5, FairBytes: 100, FairOps: 8},
			{ID: "n2", Weight: 1, State: slotdv1.NodeState_NODE_STATE_DRAINING},
		},
		HotSpots: []load.HotSpot{{Slot: 7, Node: "n1", Dimension: load.DimBytes, Share: 1.5, Tag: "t"}},
	}
	got := Build(st, infos, lv)

	if ids := []string{got.Nodes[0].ID, got.Nodes[1].ID}; !slices.Equal(ids, []string{"n1", "n2"}) {
		t.Fatalf("nodes %v, want sorted by id", ids)
	}
	n1, n2 := got.Nodes[0], got.Nodes[1]
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{"n1's slot line", n1.State == "active" && n1.Slots == 30 && n1.TargetSlots == 20 && n1.Load == 1.5 && n1.Zone == "z"},
		{"n1's measured load", n1.Measured != nil && n1.Measured.Bytes == 200 && n1.Measured.Ops == 4 && *n1.Measured.BytesRatio == 2 &&
			*n1.Measured.OpsRatio == 0.5 && n1.Measured.Reported == "2026-01-02T03:04:05Z"},
		{"n2 unknown, draining, no heartbeat on n1", n2.Measured == nil && n2.State == "draining" && n1.Heartbeat == nil},
		{"n2's heartbeat", n2.Heartbeat != nil && n2.Heartbeat.Equal(at)},
		{"orphans and leases", got.OrphanBytes["n2"] == 4096 && len(got.OrphanBytes) == 1 && slices.Equal(got.SelfFenced, []string{"n2"})},
		{"load unknown and hot spots", slices.Equal(got.LoadUnknown, []string{"n2"}) && len(got.HotSpots) == 1 && got.HotSpots[0].Tag == "t"},
		{"the move", len(got.InFlight) == 1 && got.InFlight[0].Phase == "catching_up" && got.InFlight[0].Bytes == 100 &&
			got.InFlight[0].StartedAt == "2026-01-02T03:04:05Z" && got.InFlight[0].MoveID == "p.0"},
		{"the plan", got.ActivePlan.GetId() == "p" && got.Throttle == 50 && got.Version == 12},
	} {
		if !c.ok {
			t.Errorf("%s: %+v", c.what, got)
		}
	}

	// The JSON round trip keeps the plan, in its protojson form.
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"active_plan":{"id":"p",`) || !strings.Contains(string(b), `"state":"PLAN_STATE_APPLYING"`) ||
		strings.Contains(string(b), "heartbeat") {
		t.Fatalf("JSON: %s", b)
	}
	var back Status
	if err := json.Unmarshal(b, &back); err != nil || back.ActivePlan.GetId() != "p" || back.Nodes[0].Measured.Bytes != 200 {
		t.Fatalf("round trip: %v, %+v", err, back)
	}
}

func TestBuildEmpty(t *testing.T) {
	got := Build(&slotdv1.StatusResponse{}, nil, load.View{})
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"version":0,"server":"","mover_leader":"","throttle_bytes_per_second":0,"replication":null,"nodes":[],"in_flight":[],"active_plan":null,"load_unknown":[],"hot_spots":[]}`
	if string(b) != want {
		t.Fatalf("empty status:\n%s\nwant\n%s", b, want)
	}
	var back Status
	if err := json.Unmarshal(b, &back); err != nil || back.ActivePlan.Plan != nil {
		t.Fatalf("round trip of null plan: %v %+v", err, back.ActivePlan)
	}
}

func TestSlotLines(t *testing.T) {
	node := func(id string, w uint32, st slotdv1.NodeState) *slotdv1.Node {
		return &slotdv1.Node{Id: id, Weight: w, State: st}
	}
	active, draining := slotdv1.NodeState_NODE_STATE_ACTIVE, slotdv1.NodeState_NODE_STATE_DRAINING
	for _, tc := range []struct {
		name   string
		nodes  []*slotdv1.Node
		counts map[string]int
		target []uint32
		ratio  []float64
	}{
		{"by weight, draining targets nothing", []*slotdv1.Node{node("a", 2, active), node("b", 1, active), node("c", 5, draining)},
			map[string]int{"a": 10922, "b": 2731, "c": 2731}, []uint32{10922, 5461, 0}, []float64{1, 2731.0 / 5461, 0}},
		{"no active node", []*slotdv1.Node{node("c", 1, draining)}, map[string]int{"c": 16384}, []uint32{0}, []float64{0}},
		{"before bootstrap", []*slotdv1.Node{node("a", 1, active)}, nil, []uint32{16384}, []float64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SlotLines(tc.nodes, tc.counts)
			for i, l := range got {
				if l.GetNode() != tc.nodes[i] || l.GetSlots() != uint32(tc.counts[tc.nodes[i].GetId()]) || l.GetTargetSlots() != tc.target[i] || l.GetLoad() != tc.ratio[i] {
					t.Errorf("%s: slots %d target %d ratio %v; want %d, %d, %v", l.GetNode().GetId(), l.GetSlots(), l.GetTargetSlots(), l.GetLoad(),
						tc.counts[tc.nodes[i].GetId()], tc.target[i], tc.ratio[i])
				}
			}
		})
	}
}
