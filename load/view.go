package load

import (
	"slices"
	"sort"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/mover/planner"
)

// Dimensions of a node's load, as metrics and views name them. Ops is reads
// plus writes per second (the ~10-minute averages).
const (
	DimKeys   = "keys"
	DimBytes  = "bytes"
	DimReads  = "reads"
	DimWrites = "writes"
	DimOps    = "ops"
)

// ViewOptions selects what View returns.
type ViewOptions struct {
	// Nodes limits the view to these ids (default every node in the map).
	Nodes []string
	// Slots includes every slot's load in each NodeView.
	Slots bool
}

// NodeView is what the aggregate says of one node of the map.
type NodeView struct {
	ID     string
	Weight uint32
	State  slotdv1.NodeState
	// Known is false when the node's last report expired or it never
	// reported, and it owns slots: every figure below is then zero,
	// meaning unknown. A node owning no slot is known (empty) without a
	// report; Received is then zero.
	Known    bool
	Received time.Time
	Version  uint64
	// Carried counts the node's slots whose load is what their previous
	// owner last reported: they came to it after its own last report.
	Carried int
	// Totals over the node's reported slots.
	Keys, Bytes                            uint64
	Reads1m, Writes1m, Reads10m, Writes10m float64
	// FairKeys, FairBytes and FairOps are the node's fair share of the
	// cluster's measured load: its weight over the weight of the active
	// nodes with known load, times the total over the known nodes. Zero
	// for a node that is unknown or not active (it should hold nothing).
	FairKeys, FairBytes, FairOps float64
	Slots                        []planner.SlotLoad // when ViewOptions.Slots
	HotKeys                      []planner.HotKey
}

// Ops is the node's requests per second (reads served and writes).
func (n NodeView) Ops() float64 { return n.Reads10m + n.Writes10m }

// Value returns the node's load in dimension dim.
func (n NodeView) Value(dim string) float64 {
	switch dim {
	case DimKeys:
		return float64(n.Keys)
	case DimBytes:
		return float64(n.Bytes)
	case DimReads:
		return n.Reads10m
	case DimWrites:
		return n.Writes10m
	case DimOps:
		return n.Ops()
	}
	return 0
}

// Ratio returns the node's load over its fair share in dim (keys, bytes or
// ops; 1 is balanced for any weights); ok is false when the node is
// unknown or has no share (not active, or weight 0). When the known nodes
// hold none of dim at all, every active one is balanced: 1.
func (n NodeView) Ratio(dim string) (ratio float64, ok bool) {
	var fair float64
	switch dim {
	case DimKeys:
		fair = n.FairKeys
	case DimBytes:
		fair = n.FairBytes
	case DimOps:
		fair = n.FairOps
	default:
		return 0, false
	}
	switch {
	case !n.Known || n.State != slotdv1.NodeState_NODE_STATE_ACTIVE || n.Weight == 0:
		return 0, false
	case fair <= 0:
		return 1, true // nothing to balance: every share is zero
	}
	return n.Value(dim) / fair, true
}

// HotSpot is a slot whose load alone exceeds its node's band: moving it
// cannot fix its node.
type HotSpot struct {
	Slot      uint16
	Node      string
	Dimension string // bytes or ops
	// Share is the slot's load over its node's fair share: 1.4 means the
	// slot alone is 140% of what the node should hold.
	Share float64
	Tag   string // the hash tag the slot's hot keys share, if they do
}

// View is the aggregate at one moment.
type View struct {
	At        time.Time
	Tolerance float64
	Nodes     []NodeView // in id order
	HotSpots  []HotSpot  // largest share first
}

// Unknown names the nodes whose load is unknown, in id order; empty, not
// nil, when none is.
func (v View) Unknown() []string {
	out := []string{}
	for _, n := range v.Nodes {
		if !n.Known {
			out = append(out, n.ID)
		}
	}
	return out
}

// RatioDims are the dimensions with a ratio.
var RatioDims = []string{DimKeys, DimBytes, DimOps}

// View returns what is known of every node in the map at now.
func (a *Aggregator) View(now time.Time, opts ViewOptions) View {
	v := View{At: now, Tolerance: a.cfg.Tolerance}
	m := a.cfg.Map.Current()
	if m == nil {
		return v
	}
	nodes := m.Nodes()
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	a.mu.Lock()
	all := make([]NodeView, 0, len(nodes))
	slotsOf := map[string][]planner.SlotLoad{}
	eff := a.effective(m, now)
	for _, n := range nodes {
		nv := NodeView{ID: n.ID, Weight: n.Weight, State: n.State}
		if ns := eff[n.ID]; ns != nil && ns.known {
			nv.Known, nv.Carried = true, ns.carried
			if ns.rep != nil {
				nv.Received, nv.Version = ns.rep.received, ns.rep.version
			}
			nv.HotKeys = ns.ownedHot(m, n.ID)
			for _, s := range ns.slots {
				nv.Keys += uint64(s.Keys)
				nv.Bytes += uint64(s.Bytes)
				nv.Reads1m += s.Reads1m
				nv.Writes1m += s.Writes1m
				nv.Reads10m += s.Reads
				nv.Writes10m += s.Writes
			}
			slotsOf[n.ID] = ns.slots
			if opts.Slots {
				nv.Slots = ns.slots
			}
		}
		all = append(all, nv)
	}
	a.mu.Unlock()

	// Fair shares: weight over the active known nodes' weight, times the
	// total over every known node (a draining node's load must go
	// somewhere).
	var weight, keys, bytes, ops float64
	for _, n := range all {
		if !n.Known {
			continue
		}
		keys += float64(n.Keys)
		bytes += float64(n.Bytes)
		ops += n.Ops()
		if n.State == slotdv1.NodeState_NODE_STATE_ACTIVE {
			weight += float64(n.Weight)
		}
	}
	for i := range all {
		n := &all[i]
		if !n.Known || n.State != slotdv1.NodeState_NODE_STATE_ACTIVE || weight == 0 {
			continue
		}
		w := float64(n.Weight) / weight
		n.FairKeys, n.FairBytes, n.FairOps = w*keys, w*bytes, w*ops
		band := 1 + a.cfg.Tolerance
		for _, s := range slotsOf[n.ID] {
			if n.FairBytes > 0 && s.Bytes > band*n.FairBytes {
				v.HotSpots = append(v.HotSpots, HotSpot{Slot: s.Slot, Node: n.ID, Dimension: DimBytes, Share: s.Bytes / n.FairBytes, Tag: s.Tag})
			}
			if o := s.Ops(); n.FairOps > 0 && o > band*n.FairOps {
				v.HotSpots = append(v.HotSpots, HotSpot{Slot: s.Slot, Node: n.ID, Dimension: DimOps, Share: o / n.FairOps, Tag: s.Tag})
			}
		}
	}
	sort.SliceStable(v.HotSpots, func(i, j int) bool {
		if v.HotSpots[i].Share != v.HotSpots[j].Share {
			return v.HotSpots[i].Share > v.HotSpots[j].Share
		}
		return v.HotSpots[i].Slot < v.HotSpots[j].Slot
	})
	if len(opts.Nodes) == 0 {
		v.Nodes = all
		return v
	}
	for _, n := range all {
		if slices.Contains(opts.Nodes, n.ID) {
			v.Nodes = append(v.Nodes, n)
		}
	}
	return v
}
