package directory

import (
	"slices"

	"github.com/slotd/slotd/slots"
)

// What the views of replica sets read from a snapshot: slotctl status,
// map --replicas and nodes list, the console and the metrics. Both walks
// below read the stored sets by node index and allocate nothing per slot,
// so a status read every second costs one pass over 16,384 slots.

// ReplicaSummary is how a snapshot's replica sets stand against its
// policy, with the zone rule and what each node holds.
type ReplicaSummary struct {
	ReplicaHealth
	// ZoneViolations counts the slots whose replicas do not sit in
	// distinct zones: two in one zone, or one without a zone in a set of
	// more than one. Every writer refuses to make one, so it stays 0.
	ZoneViolations int
	// ZoneSpread[n] counts the slots whose replicas sit in n zones, a node
	// without a zone counting as a zone of its own; its last entry is not
	// 0 (empty before any slot has a replica).
	ZoneSpread []int
	// Nodes holds what every registered node holds, by node id.
	Nodes map[string]NodeReplicas
}

// NodeReplicas counts the slots a node is primary of, an in-sync follower
// of (in the ISR, not primary) and a learner of.
type NodeReplicas struct {
	Primaries, Followers, Learners int
}

// ReplicaRange is a run of consecutive slots with the same replicas.
type ReplicaRange struct {
	From, To slots.Slot
	// ISR holds the in-sync replicas, the primary first; Learners the
	// replicas being filled.
	ISR, Learners []string
	// Zones are the replicas' distinct zones, sorted ("" for a node
	// without one).
	Zones []string
	// UnderReplicated: fewer in-sync replicas than rf; BelowMinISR: fewer
	// than min_isr.
	UnderReplicated, BelowMinISR bool
	// ZoneViolation: two replicas in one zone, or one without a zone in a
	// set of more than one.
	ZoneViolation bool
}

// Count is the number of slots in the range.
func (r ReplicaRange) Count() int { return r.To.Int() - r.From.Int() + 1 }

// ReplicaSummary counts the slots whose sets fall short of the policy or
// break the zone rule, how many zones the slots span, and every node's
// primaries, followers and learners.
func (s *Snapshot) ReplicaSummary() ReplicaSummary {
	out := ReplicaSummary{ReplicaHealth: s.ReplicaHealth(), Nodes: make(map[string]NodeReplicas, len(s.Nodes))}
	ix := s.nodeIndex()
	held := make([]NodeReplicas, len(s.Nodes))
	s.eachSet(func(_ int, r *replicaRec) {
		for i, idx := range r.isr {
			if p := ix.pos(idx); p >= 0 && i == 0 {
				held[p].Primaries++
			} else if p >= 0 {
				held[p].Followers++
			}
		}
		for _, idx := range r.learners {
			if p := ix.pos(idx); p >= 0 {
				held[p].Learners++
			}
		}
		n, bad := ix.spread(r)
		if bad {
			out.ZoneViolations++
		}
		for len(out.ZoneSpread) <= n {
			out.ZoneSpread = append(out.ZoneSpread, 0)
		}
		out.ZoneSpread[n]++
	})
	for i, n := range s.Nodes {
		out.Nodes[n.ID] = held[i]
	}
	return out
}

// ReplicaRanges returns every slot's replicas as runs of consecutive slots
// with the same ISR and learners, in slot order. Epochs are left out: a
// run is about who holds the slots. Runs with the same replicas share
// their ISR, Learners and Zones slices: treat them as read-only.
func (s *Snapshot) ReplicaRanges() []ReplicaRange {
	ix := s.nodeIndex()
	// A bootstrap's ring walk gives neighbours different sets, so there
	// may be a run per slot but only a few distinct sets: each is named
	// and judged once.
	type shape struct {
		isr, learners, zones []string
		violation            bool
	}
	shapes := map[string]*shape{}
	var key []byte
	var out []ReplicaRange
	var last *shape
	s.eachSet(func(sl int, r *replicaRec) {
		key = key[:0]
		for _, idx := range r.isr {
			key = append(key, byte(idx>>8), byte(idx))
		}
		key = append(key, 0xff, 0xff) // no index is noOwner
		for _, idx := range r.learners {
			key = append(key, byte(idx>>8), byte(idx))
		}
		sh, ok := shapes[string(key)]
		if !ok {
			set := r.withIDs(sl, s.nodeAt)
			sh = &shape{isr: set.ISR, learners: set.Learners}
			_, sh.violation = ix.spread(r)
			for _, idx := range r.members() {
				if z := ix.zone(idx); !slices.Contains(sh.zones, z) {
					sh.zones = append(sh.zones, z)
				}
			}
			slices.Sort(sh.zones)
			shapes[string(key)] = sh
		}
		if sh == last {
			out[len(out)-1].To = slots.MustNew(sl)
			return
		}
		last = sh
		out = append(out, ReplicaRange{From: slots.MustNew(sl), To: slots.MustNew(sl), ISR: sh.isr, Learners: sh.learners, Zones: sh.zones,
			UnderReplicated: len(r.isr) < s.Replication.RF, BelowMinISR: len(r.isr) < s.Replication.MinISR, ZoneViolation: sh.violation})
	})
	return out
}

// eachSet calls fn with every slot's set in slot order; an implied set
// ({owner}) is passed in a rec fn must not keep.
func (s *Snapshot) eachSet(fn func(slot int, r *replicaRec)) {
	var owner [1]uint16
	implied := &replicaRec{}
	for i := range slots.Count {
		if c := s.replicas[i/chunkSlots]; c != nil && c[i%chunkSlots] != nil {
			fn(i, c[i%chunkSlots])
			continue
		}
		owner[0] = s.owners[i]
		implied.isr = owner[:]
		fn(i, implied)
	}
}

// nodeIndex maps a node index to its node's position in the snapshot's
// Nodes and zone, by slice: the walks look up every replica of every slot.
type nodeIndex struct {
	at    []int32 // position in Nodes, -1 for an index that is no node's
	zones []string
}

func (s *Snapshot) nodeIndex() nodeIndex {
	top := 0
	for _, idx := range s.idxOf {
		top = max(top, int(idx))
	}
	ix := nodeIndex{at: make([]int32, top+1), zones: make([]string, top+1)}
	for i := range ix.at {
		ix.at[i] = -1
	}
	for i, idx := range s.idxOf {
		ix.at[idx], ix.zones[idx] = int32(i), s.Nodes[i].Zone
	}
	return ix
}

func (ix nodeIndex) pos(idx uint16) int {
	if int(idx) < len(ix.at) {
		return int(ix.at[idx])
	}
	return -1
}

func (ix nodeIndex) zone(idx uint16) string {
	if int(idx) < len(ix.zones) {
		return ix.zones[idx]
	}
	return ""
}

// spread returns how many zones r's replicas sit in (a node without a
// zone counting as its own) and whether they break the zone rule.
func (ix nodeIndex) spread(r *replicaRec) (zones int, violation bool) {
	members := len(r.isr) + len(r.learners)
	at := func(i int) string {
		if i < len(r.isr) {
			return ix.zone(r.isr[i])
		}
		return ix.zone(r.learners[i-len(r.isr)])
	}
	for i := range members {
		zi := at(i)
		shared := false
		for j := 0; j < i && zi != ""; j++ {
			shared = shared || at(j) == zi
		}
		violation = violation || shared || (zi == "" && members > 1)
		if !shared {
			zones++
		}
	}
	return zones, violation
}
