package clusterstatus

import "github.com/slotd/slotd/api/slotdv1"

// Replication is the replication policy and how the slots' replica sets
// stand against it (Admin.Status's replicas):
//
//	{"rf": 3, "min_isr": 2, "zones": ["a", "b", "c"],
//	 "under_replicated": 0, "below_min_isr": 0, "with_learners": 0, "zone_violations": 0,
//	 "zone_spread": [{"zones": 3, "slots": 16384}]}
//
// under_replicated counts the slots with fewer in-sync replicas than rf,
// below_min_isr those with fewer than min_isr (their writes stop),
// with_learners those with replicas being filled. zone_violations counts
// the slots whose replicas do not sit in distinct zones (always 0: the
// directory refuses every change that would make one). zone_spread says
// how many slots have their replicas in how many zones, fewest first (a
// node without a zone counts as a zone of its own); counts are 0 and
// zone_spread empty before the bootstrap. zones are the zones that hold
// active nodes, sorted.
type Replication struct {
	RF              uint32       `json:"rf"`
	MinISR          uint32       `json:"min_isr"`
	Zones           []string     `json:"zones"`
	UnderReplicated uint32       `json:"under_replicated"`
	BelowMinISR     uint32       `json:"below_min_isr"`
	WithLearners    uint32       `json:"with_learners"`
	ZoneViolations  uint32       `json:"zone_violations"`
	ZoneSpread      []ZoneSpread `json:"zone_spread"`
}

// ZoneSpread counts the slots whose replicas sit in Zones zones.
type ZoneSpread struct {
	Zones uint32 `json:"zones"`
	Slots uint32 `json:"slots"`
}

// NodeReplicas is what a node holds:
//
//	{"primaries": 5461, "followers": 10923, "learners": 0}
//
// the slots it is primary of (its slots), an in-sync follower of, and a
// learner of (being filled).
type NodeReplicas struct {
	Primaries uint32 `json:"primaries"`
	Followers uint32 `json:"followers"`
	Learners  uint32 `json:"learners"`
}

// replicationOf reads Admin.Status's replicas: nil when the slotd did not
// send them, and every node's counts by id.
func replicationOf(r *slotdv1.ReplicaStatus) (*Replication, map[string]*NodeReplicas) {
	if r == nil {
		return nil, nil
	}
	out := &Replication{RF: r.GetPolicy().GetRf(), MinISR: r.GetPolicy().GetMinIsr(), Zones: append([]string{}, r.GetZones()...),
		UnderReplicated: r.GetUnderReplicated(), BelowMinISR: r.GetBelowMinIsr(), WithLearners: r.GetWithLearners(),
		ZoneViolations: r.GetZoneViolations(), ZoneSpread: []ZoneSpread{}}
	for _, z := range r.GetZoneSpread() {
		out.ZoneSpread = append(out.ZoneSpread, ZoneSpread{Zones: z.GetZones(), Slots: z.GetSlots()})
	}
	nodes := make(map[string]*NodeReplicas, len(r.GetNodes()))
	for _, n := range r.GetNodes() {
		nodes[n.GetNodeId()] = &NodeReplicas{Primaries: n.GetPrimaries(), Followers: n.GetFollowers(), Learners: n.GetLearners()}
	}
	return out, nodes
}

// ReplicaSetState is a slot range's state as printed: "ok",
// "under-replicated" (fewer in-sync replicas than rf) or "below-min-isr"
// (fewer than min_isr: its writes stop); "zone-violation" before either
// when two replicas share a zone.
func ReplicaSetState(r *slotdv1.ReplicaRange) string {
	switch {
	case r.GetZoneViolation():
		return "zone-violation"
	case r.GetBelowMinIsr():
		return "below-min-isr"
	case r.GetUnderReplicated():
		return "under-replicated"
	}
	return "ok"
}
