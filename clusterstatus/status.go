package clusterstatus

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/load"
	"github.com/slotd/slotd/slots"
)

// Status is the cluster as one slotd answers for it. Its JSON is
// `slotctl status -o json` (without the balancer, which slotctl adds):
//
//	{"version": 12, "server": "slotd-1", "mover_leader": "slotd-1",
//	 "throttle_bytes_per_second": 50000000, "replication": <Replication>,
//	 "nodes": [<Node>], "in_flight": [<Move>], "active_plan": <Plan> or null,
//	 "orphan_bytes": {"n2": 1048576}, "self_fenced": ["n3"],
//	 "load_unknown": ["n3"], "hot_spots": [<HotSpot>]}
//
// Nodes are sorted by id. orphan_bytes and self_fenced are omitted when
// empty; load_unknown and hot_spots are empty against a slotd without load;
// replication is null from a slotd that does not report replica sets.
type Status struct {
	Version     uint64 `json:"version"`
	Server      string `json:"server"`
	MoverLeader string `json:"mover_leader"`
	// Throttle is the copy rate of every donor; 0 means no limit.
	Throttle    uint64       `json:"throttle_bytes_per_second"`
	Replication *Replication `json:"replication"`
	Nodes       []Node       `json:"nodes"`
	InFlight    []Move       `json:"in_flight"`
	ActivePlan  Plan         `json:"active_plan"`
	// OrphanBytes is, per node that reported any, the bytes it holds that
	// nothing in the directory explains (left copies its reconciliation
	// is dropping or waiting out the grace for).
	OrphanBytes map[string]int64 `json:"orphan_bytes,omitempty"`
	// SelfFenced names the nodes without a live lease: they serve none of
	// their slots (cut off from slotd, stopped, or not registered yet).
	SelfFenced []string `json:"self_fenced,omitempty"`
	// LoadUnknown names the nodes whose load is unknown; HotSpots the
	// slots moving cannot fix.
	LoadUnknown []string  `json:"load_unknown"`
	HotSpots    []HotSpot `json:"hot_spots"`
}

// Node is one node's line:
//
//	{"id": "n1", "address": "127.0.0.1:7501", "zone": "", "weight": 1,
//	 "state": "active", "slots": 5462, "target_slots": 5461,
//	 "replicas": <NodeReplicas> or null, "load": 1.0002,
//	 "measured": <Measured> or null}
//
// Load is Slots/TargetSlots, the slot ratio (1 is balanced; 0 when the
// node should own nothing).
type Node struct {
	NodeSlots
	Load float64 `json:"load"`
	// Measured is nil while the node's load is unknown (no report within
	// three of its intervals): unknown is never zero.
	Measured *Measured `json:"measured"`
	// Heartbeat is the node's last heartbeat, nil when none is known (the
	// console shows it; slotctl shows it in nodes list).
	Heartbeat *time.Time `json:"-"`
}

// NodeSlots is a node and its slots: the first fields of its line, here
// and on the console. State is active, draining or down; TargetSlots is the
// node's share of the slots for its weight (0 when not active); Replicas
// what it holds as primary, follower and learner (nil before the bootstrap
// or from a slotd that does not report replica sets).
type NodeSlots struct {
	ID          string        `json:"id"`
	Address     string        `json:"address"`
	Zone        string        `json:"zone"`
	Weight      uint32        `json:"weight"`
	State       string        `json:"state"`
	Slots       uint32        `json:"slots"`
	TargetSlots uint32        `json:"target_slots"`
	Replicas    *NodeReplicas `json:"replicas"`
}

// Measured is a node's measured load, from its last report:
//
//	{"keys": 33000, "bytes": 1572864, "reads_per_second": 120.5, "writes_per_second": 30,
//	 "ops_per_second": 150.5, "keys_ratio": 1.01, "bytes_ratio": 1.12, "ops_ratio": 0.95,
//	 "reported_at": "2026-01-02T03:04:05Z"}
//
// Rates are ~10-minute averages. A ratio is the node's load over its fair
// share (its weight over the weight of the active nodes with known load,
// times the cluster's total): 1 is balanced; absent when the node has no
// share (not active).
type Measured struct {
	Keys       uint64   `json:"keys"`
	Bytes      uint64   `json:"bytes"`
	Reads      float64  `json:"reads_per_second"`
	Writes     float64  `json:"writes_per_second"`
	Ops        float64  `json:"ops_per_second"`
	KeysRatio  *float64 `json:"keys_ratio,omitempty"`
	BytesRatio *float64 `json:"bytes_ratio,omitempty"`
	OpsRatio   *float64 `json:"ops_ratio,omitempty"`
	Reported   string   `json:"reported_at"`
}

// Move is a move in flight:
//
//	{"plan_id": "...", "move_id": "...", "slot": 17, "from": "n1", "to": "n4",
//	 "phase": "copying", "bytes_copied": 1024, "started_at": "2026-01-02T03:04:05Z"}
type Move struct {
	PlanID      string `json:"plan_id"`
	MoveID      string `json:"move_id"`
	Slot        uint32 `json:"slot"`
	From        string `json:"from"`
	To          string `json:"to"`
	Phase       string `json:"phase"`
	BytesCopied uint64 `json:"bytes_copied"`
	StartedAt   string `json:"started_at"`
	// Bytes is the planner's estimate of the slot's size, as the status
	// answers it (the console shows it).
	Bytes uint64 `json:"-"`
}

// HotSpot is a slot whose load alone exceeds its node's band:
//
//	{"slot": 3330, "node": "n2", "dimension": "ops", "share": 1.33, "tag": "cart7"}
type HotSpot struct {
	Slot      uint16  `json:"slot"`
	Node      string  `json:"node"`
	Dimension string  `json:"dimension"`
	Share     float64 `json:"share"`
	Tag       string  `json:"tag,omitempty"`
}

// Build assembles the status from a slotd's answers: st from Admin.Status,
// infos from Directory.ListNodes (heartbeats, orphan bytes and leases; nil
// when that call failed) and lv, its load view (Load.Get; the zero View
// from a slotd without load).
func Build(st *slotdv1.StatusResponse, infos []*slotdv1.NodeInfo, lv load.View) Status {
	out := Status{
		Version: st.GetVersion(), Server: st.GetServer(), MoverLeader: st.GetMoverLeader(),
		Throttle: st.GetThrottle().GetDefaultBytesPerSecond(), Nodes: []Node{}, InFlight: []Move{},
		ActivePlan: Plan{st.GetActivePlan()}, LoadUnknown: lv.Unknown(), HotSpots: []HotSpot{},
	}
	var held map[string]*NodeReplicas
	out.Replication, held = replicationOf(st.GetReplicas())
	heartbeats := map[string]*time.Time{}
	for _, n := range infos {
		id := n.GetNode().GetId()
		if b := n.GetOrphanBytes(); b > 0 {
			if out.OrphanBytes == nil {
				out.OrphanBytes = map[string]int64{}
			}
			out.OrphanBytes[id] = b
		}
		if n.GetLeaseExpires() == nil {
			out.SelfFenced = append(out.SelfFenced, id)
		}
		if hb := n.GetLastHeartbeat(); hb != nil {
			t := hb.AsTime().UTC()
			heartbeats[id] = &t
		}
	}
	slices.Sort(out.SelfFenced)
	measured := map[string]*Measured{}
	for _, n := range lv.Nodes {
		measured[n.ID] = measuredOf(n)
	}
	for _, n := range st.GetNodes() {
		nd := n.GetNode()
		out.Nodes = append(out.Nodes, Node{
			NodeSlots: NodeSlots{ID: nd.GetId(), Address: nd.GetAddress(), Zone: nd.GetZone(), Weight: nd.GetWeight(), State: NodeState(nd.GetState()),
				Slots: n.GetSlots(), TargetSlots: n.GetTargetSlots(), Replicas: held[nd.GetId()]},
			Load: n.GetLoad(), Measured: measured[nd.GetId()], Heartbeat: heartbeats[nd.GetId()],
		})
	}
	slices.SortFunc(out.Nodes, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	for _, m := range st.GetInFlight() {
		out.InFlight = append(out.InFlight, Move{
			PlanID: m.GetPlanId(), MoveID: m.GetId(), Slot: m.GetSlot(), From: m.GetFrom(), To: m.GetTo(),
			Phase: MovePhase(m.GetPhase()), BytesCopied: m.GetBytesCopied(), StartedAt: TimeJSON(m.GetStartedAt()), Bytes: m.GetBytes(),
		})
	}
	for _, h := range lv.HotSpots {
		out.HotSpots = append(out.HotSpots, HotSpot{Slot: h.Slot, Node: h.Node, Dimension: h.Dimension, Share: h.Share, Tag: h.Tag})
	}
	return out
}

// SlotLines gives every node its slot count (counts, by id), its target
// (its weight's share of the slots among the active nodes, rounded down; 0
// when it is not active) and the ratio of the two (0 without a target):
// the nodes' lines as Admin.Status answers them, and Build reads them.
func SlotLines(nodes []*slotdv1.Node, counts map[string]int) []*slotdv1.NodeLoad {
	var total int64
	for _, n := range nodes {
		if n.GetState() == slotdv1.NodeState_NODE_STATE_ACTIVE {
			total += int64(n.GetWeight())
		}
	}
	out := make([]*slotdv1.NodeLoad, 0, len(nodes))
	for _, n := range nodes {
		l := &slotdv1.NodeLoad{Node: n, Slots: uint32(counts[n.GetId()])}
		if n.GetState() == slotdv1.NodeState_NODE_STATE_ACTIVE && total > 0 {
			l.TargetSlots = uint32(int64(n.GetWeight()) * slots.Count / total)
			if l.TargetSlots > 0 {
				l.Load = float64(l.Slots) / float64(l.TargetSlots)
			}
		}
		out = append(out, l)
	}
	return out
}

func measuredOf(n load.NodeView) *Measured {
	if !n.Known {
		return nil
	}
	m := &Measured{Keys: n.Keys, Bytes: n.Bytes, Reads: n.Reads10m, Writes: n.Writes10m, Ops: n.Ops(),
		Reported: n.Received.UTC().Format(time.RFC3339Nano)}
	ratio := func(d string) *float64 {
		if r, ok := n.Ratio(d); ok {
			return &r
		}
		return nil
	}
	m.KeysRatio, m.BytesRatio, m.OpsRatio = ratio(load.DimKeys), ratio(load.DimBytes), ratio(load.DimOps)
	return m
}

// NodeState is a node state as printed: NODE_STATE_DRAINING is "draining".
func NodeState(s slotdv1.NodeState) string { return enumName(s.String(), "NODE_STATE_") }

// MovePhase is a move phase as printed: MOVE_PHASE_CATCHING_UP is
// "catching_up".
func MovePhase(p slotdv1.MovePhase) string { return enumName(p.String(), "MOVE_PHASE_") }

// PlanState is a plan state as printed: PLAN_STATE_APPLYING is "applying".
func PlanState(s slotdv1.PlanState) string { return enumName(s.String(), "PLAN_STATE_") }

func enumName(v, prefix string) string { return strings.ToLower(strings.TrimPrefix(v, prefix)) }

// TimeJSON is a time as printed: RFC 3339 in UTC, "" when unset.
func TimeJSON(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().UTC().Format(time.RFC3339Nano)
}
