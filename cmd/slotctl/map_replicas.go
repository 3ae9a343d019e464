package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/clusterstatus"
	"github.com/slotd/slotd/slots"
)

// mapReplicasJSON is `slotctl map --replicas -o json`: the slots' replica
// sets as runs of consecutive slots with the same replicas, in slot order.
//
//	{"version": 12, "rf": 3, "min_isr": 2,
//	 "ranges": [{"slots": "0-120", "from": 0, "to": 120, "count": 121, "primary": "n1",
//	             "isr": ["n1", "n2", "n3"], "learners": [], "zones": ["a", "b", "c"],
//	             "state": "ok"}]}
//
// isr holds the in-sync replicas, the primary first; learners the replicas
// being filled; zones the replicas' distinct zones, sorted. state is ok,
// under-replicated (fewer in-sync replicas than rf), below-min-isr (fewer
// than min_isr: writes stop) or zone-violation. With --node, only the
// ranges where that node holds a replica; with --under-replicated, only
// those short of rf.
type mapReplicasJSON struct {
	Version uint64             `json:"version"`
	RF      uint32             `json:"rf"`
	MinISR  uint32             `json:"min_isr"`
	Ranges  []replicaRangeJSON `json:"ranges"`
}

type replicaRangeJSON struct {
	Slots    string   `json:"slots"`
	From     uint32   `json:"from"`
	To       uint32   `json:"to"`
	Count    uint32   `json:"count"`
	Primary  string   `json:"primary"`
	ISR      []string `json:"isr"`
	Learners []string `json:"learners"`
	Zones    []string `json:"zones"`
	State    string   `json:"state"`
}

func replicaRanges(resp *slotdv1.ListReplicaSetsResponse) mapReplicasJSON {
	out := mapReplicasJSON{Version: resp.GetVersion(), RF: resp.GetPolicy().GetRf(), MinISR: resp.GetPolicy().GetMinIsr(), Ranges: []replicaRangeJSON{}}
	for _, r := range resp.GetRanges() {
		rg := slots.Range{From: slots.MustNew(int(r.GetFrom())), To: slots.MustNew(int(r.GetTo()))}
		j := replicaRangeJSON{Slots: rg.String(), From: r.GetFrom(), To: r.GetTo(), Count: r.GetTo() - r.GetFrom() + 1,
			ISR: orEmpty(r.GetIsr()), Learners: orEmpty(r.GetLearners()), Zones: orEmpty(r.GetZones()), State: clusterstatus.ReplicaSetState(r)}
		if len(j.ISR) > 0 {
			j.Primary = j.ISR[0]
		}
		out.Ranges = append(out.Ranges, j)
	}
	return out
}

func (g *globals) printMapReplicas(resp *slotdv1.ListReplicaSetsResponse) error {
	out := replicaRanges(resp)
	return g.print(out, func(w io.Writer) error {
		var held, short uint32
		for _, r := range out.Ranges {
			held += r.Count
			if r.State != "ok" {
				short += r.Count
			}
		}
		fmt.Fprintf(w, "version %d, rf %d, min isr %d: %d ranges of %d slots, %d of them short of rf or their zones\n\n",
			out.Version, out.RF, out.MinISR, len(out.Ranges), held, short)
		t := newTable(w, "SLOTS", "COUNT", "PRIMARY", "ISR", "LEARNERS", "ZONES", "STATE")
		for _, r := range out.Ranges {
			t.row(r.Slots, r.Count, r.Primary, strings.Join(r.ISR, ","), orDash(strings.Join(r.Learners, ",")), zonesText(r.Zones), r.State)
		}
		return t.flush()
	})
}

// zonesText prints zones comma-joined, "-" for a node without one.
func zonesText(zones []string) string {
	out := make([]string, len(zones))
	for i, z := range zones {
		out[i] = orDash(z)
	}
	return strings.Join(out, ",")
}

// replicationLines are status's two lines on replication: the policy and
// zones, then how the slots' replica sets stand.
//
//	replication: rf 3, min isr 2, zones a, b, c
//	replica sets: 0 under-replicated, 0 below min isr, 0 filling, 0 zone violations; 16384 slots in 3 zones
func replicationLines(r *clusterstatus.Replication) string {
	if r == nil {
		return "replication: unknown (slotd did not report it)"
	}
	head := fmt.Sprintf("replication: rf %d, min isr %d, zones %s", r.RF, r.MinISR, orDash(strings.Join(r.Zones, ", ")))
	if len(r.ZoneSpread) == 0 {
		return head + "\nreplica sets: none before the bootstrap"
	}
	spread := make([]string, 0, len(r.ZoneSpread))
	for i := len(r.ZoneSpread) - 1; i >= 0; i-- {
		z := r.ZoneSpread[i]
		spread = append(spread, fmt.Sprintf("%d %s in %d %s", z.Slots, plural(z.Slots, "slot"), z.Zones, plural(z.Zones, "zone")))
	}
	return fmt.Sprintf("%s\nreplica sets: %d under-replicated, %d below min isr, %d filling, %d zone violations; %s",
		head, r.UnderReplicated, r.BelowMinISR, r.WithLearners, r.ZoneViolations, strings.Join(spread, ", "))
}

func plural(n uint32, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
