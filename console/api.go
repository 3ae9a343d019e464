package console

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/clusterstatus"
	"github.com/slotd/slotd/load"
	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/slots"
)

// The JSON the page polls. docs/console.md documents every field; keep
// the two in step.

// mapJSON is GET /api/v1/map.
type mapJSON struct {
	Version   uint64 `json:"version"`
	ClusterID string `json:"cluster_id"`
	// Nodes are the node ids, sorted, and Zones their zones ("" for
	// none); Owners[s] indexes them (-1: none).
	Nodes      []string        `json:"nodes"`
	Zones      []string        `json:"zones"`
	Owners     []int           `json:"owners"`
	Migrations []migrationJSON `json:"migrations"`
}

type migrationJSON struct {
	Slot  int    `json:"slot"`
	From  string `json:"from"`
	To    string `json:"to"`
	Phase string `json:"phase"`
}

// statusJSON is GET /api/v1/status.
type statusJSON struct {
	Now         time.Time `json:"now"`
	Version     uint64    `json:"version"`
	ClusterID   string    `json:"cluster_id"`
	Server      string    `json:"server"`
	MoverLeader string    `json:"mover_leader"`
	Throttle    uint64    `json:"throttle_bytes_per_second"`
	// Replication is the status's (clusterstatus.Replication): the policy,
	// the under-replicated slots, the zone spread.
	Replication *clusterstatus.Replication `json:"replication"`
	Nodes       []nodeJSON                 `json:"nodes"`
	Plan        *planJSON                  `json:"plan"`
	InFlight    []inFlightJSON             `json:"in_flight"`
	History     []historyJSON              `json:"history"`
	Load        loadSummaryJSON            `json:"load"`
}

type nodeJSON struct {
	clusterstatus.NodeSlots
	SlotRatio float64    `json:"slot_ratio"`
	Heartbeat *time.Time `json:"last_heartbeat"`
	// Measured load: null when the node has not reported any.
	Keys       *float64 `json:"keys"`
	Bytes      *float64 `json:"bytes"`
	Ops        *float64 `json:"ops"`
	BytesRatio *float64 `json:"bytes_ratio"`
	OpsRatio   *float64 `json:"ops_ratio"`
}

type planJSON struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Reason  string `json:"reason"`
	Moves   uint32 `json:"moves"`
	Done    uint32 `json:"done"`
	Skipped uint32 `json:"skipped"`
	Aborted uint32 `json:"aborted"`
	Pending uint32 `json:"pending"`
	// Bytes is the planner's estimate; BytesDone what was copied.
	Bytes     uint64 `json:"bytes"`
	BytesDone uint64 `json:"bytes_done"`
	// Rates over the last RateWindow as this slotd saw the plan; null
	// until two observations a second apart.
	MovesPerSecond *float64 `json:"moves_per_second"`
	BytesPerSecond *float64 `json:"bytes_per_second"`
	ETASeconds     *float64 `json:"eta_seconds"`
}

type inFlightJSON struct {
	Slot        uint32 `json:"slot"`
	From        string `json:"from"`
	To          string `json:"to"`
	Phase       string `json:"phase"`
	Bytes       uint64 `json:"bytes"`
	BytesCopied uint64 `json:"bytes_copied"`
}

type historyJSON struct {
	Version uint64    `json:"version"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Slot    *int      `json:"slot,omitempty"`
	From    string    `json:"from,omitempty"`
	To      string    `json:"to,omitempty"`
	Node    string    `json:"node,omitempty"`
	PlanID  string    `json:"plan_id,omitempty"`
	By      string    `json:"by,omitempty"`
	Reason  string    `json:"reason,omitempty"`
}

type loadSummaryJSON struct {
	// Measured lists the nodes that reported load.
	Measured []string      `json:"measured"`
	HotSlots []hotSlotJSON `json:"hot_slots"`
	HotKeys  []hotKeyJSON  `json:"hot_keys"`
}

type hotSlotJSON struct {
	Slot  int     `json:"slot"`
	Owner string  `json:"owner"`
	Keys  float64 `json:"keys"`
	Bytes float64 `json:"bytes"`
	Ops   float64 `json:"ops"`
}

type hotKeyJSON struct {
	Key  string  `json:"key"`
	Slot int     `json:"slot"`
	Node string  `json:"node"`
	Rate float64 `json:"rate"`
}

// loadJSON is GET /api/v1/load: per slot, null where the owner has not
// reported (unmeasured), else its keys, bytes and ops per second.
type loadJSON struct {
	Version uint64     `json:"version"`
	Keys    []*float64 `json:"keys"`
	Bytes   []*float64 `json:"bytes"`
	Ops     []*float64 `json:"ops"`
}

// hotLimit is how many hot slots and keys the status lists.
const hotLimit = 10

// historyLimit is how many recent changes the status lists.
const historyLimit = 20

func buildMap(m *slotmap.Map) mapJSON {
	out := mapJSON{Nodes: []string{}, Zones: []string{}, Owners: make([]int, slots.Count), Migrations: []migrationJSON{}}
	if m == nil {
		for i := range out.Owners {
			out.Owners[i] = -1
		}
		return out
	}
	out.Version, out.ClusterID = m.Version(), m.ClusterID()
	idx := map[string]int{}
	nodes := m.Nodes()
	slices.SortFunc(nodes, func(a, b slotmap.Node) int { return cmp.Compare(a.ID, b.ID) })
	for i, n := range nodes {
		out.Nodes = append(out.Nodes, n.ID)
		out.Zones = append(out.Zones, n.Zone)
		idx[n.ID] = i
	}
	for s := range slots.Count {
		i, ok := idx[m.OwnerID(slots.MustNew(s))]
		if !ok {
			i = -1
		}
		out.Owners[s] = i
	}
	for _, mg := range m.Migrations() {
		out.Migrations = append(out.Migrations, migrationJSON{Slot: mg.Slot.Int(), From: mg.From, To: mg.To, Phase: clusterstatus.MovePhase(mg.Phase)})
	}
	return out
}

// perSlot is the measured load of every slot: nil where unmeasured.
type perSlot [slots.Count]*planner.SlotLoad

// slotLoads spreads the view's slots over the slots of map m: a slot is
// measured when its owner's load is known; a slot absent from its slots is
// empty and idle.
func slotLoads(m *slotmap.Map, lv load.View) *perSlot {
	var out perSlot
	if m == nil {
		return &out
	}
	byNode := map[string]map[uint16]planner.SlotLoad{}
	for _, n := range lv.Nodes {
		if !n.Known {
			continue
		}
		sl := make(map[uint16]planner.SlotLoad, len(n.Slots))
		for _, s := range n.Slots {
			sl[s.Slot] = s
		}
		byNode[n.ID] = sl
	}
	for s := range slots.Count {
		rep, ok := byNode[m.OwnerID(slots.MustNew(s))]
		if !ok {
			continue
		}
		l := rep[uint16(s)]
		l.Slot = uint16(s)
		out[s] = &l
	}
	return &out
}

func buildLoad(version uint64, ps *perSlot) loadJSON {
	out := loadJSON{Version: version, Keys: make([]*float64, slots.Count), Bytes: make([]*float64, slots.Count), Ops: make([]*float64, slots.Count)}
	for s, l := range ps {
		if l == nil {
			continue
		}
		k, b, o := l.Keys, l.Bytes, round1(l.Ops())
		out.Keys[s], out.Bytes[s], out.Ops[s] = &k, &b, &o
	}
	return out
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// round3 is a ratio as the console shows it, to three places; nil stays
// nil (no ratio).
func round3(r *float64) *float64 {
	if r == nil {
		return nil
	}
	return ptr(float64(int64(*r*1000+0.5)) / 1000)
}

func ptr(f float64) *float64 { return &f }

// buildStatus assembles the status from the source's reads: the cluster's
// status (clusterstatus, as slotctl status shows it) under the console's
// field names, with the plan's rates, the recent history and the hottest
// slots and keys.
func (h *Handler) buildStatus(ctx context.Context) (statusJSON, error) {
	resp, err := h.cfg.Source.Status(ctx)
	if err != nil {
		return statusJSON{}, err
	}
	var infos []*slotdv1.NodeInfo
	if ln, err := h.cfg.Source.Nodes(ctx); err == nil {
		infos = ln.GetNodes()
	} else {
		h.cfg.Logger.Debug("console: list nodes", "err", err)
	}
	lv := h.view(ctx)
	st := clusterstatus.Build(resp, infos, lv)
	now := h.cfg.Now()
	out := statusJSON{Version: st.Version, Server: st.Server, MoverLeader: st.MoverLeader,
		Throttle: st.Throttle, Replication: st.Replication, Nodes: []nodeJSON{}, InFlight: []inFlightJSON{}, History: []historyJSON{},
		Load: loadSummaryJSON{Measured: []string{}, HotSlots: []hotSlotJSON{}, HotKeys: []hotKeyJSON{}}}
	m := h.cfg.Source.Map()
	if m != nil {
		out.ClusterID = m.ClusterID()
	}
	for _, n := range st.Nodes {
		j := nodeJSON{NodeSlots: n.NodeSlots, SlotRatio: n.Load, Heartbeat: n.Heartbeat}
		if l := n.Measured; l != nil {
			j.Keys, j.Bytes, j.Ops = ptr(float64(l.Keys)), ptr(float64(l.Bytes)), ptr(round1(l.Ops))
			j.BytesRatio, j.OpsRatio = round3(l.BytesRatio), round3(l.OpsRatio)
			out.Load.Measured = append(out.Load.Measured, n.ID)
		}
		out.Nodes = append(out.Nodes, j)
	}

	if p := st.ActivePlan.Plan; p != nil {
		pr := p.GetProgress()
		pj := &planJSON{ID: p.GetId(), State: clusterstatus.PlanState(p.GetState()), Reason: p.GetReason(),
			Moves: pr.GetMoves(), Done: pr.GetDone(), Skipped: pr.GetSkipped(), Aborted: pr.GetAborted(), Pending: pr.GetPending(),
			Bytes: pr.GetBytes(), BytesDone: pr.GetBytesDone()}
		if mps, bps, ok := h.rates.observe(p.GetId(), now, pr.GetDone()+pr.GetSkipped()+pr.GetAborted(), pr.GetBytesDone()); ok {
			pj.MovesPerSecond, pj.BytesPerSecond = ptr(round1(mps)), ptr(round1(bps))
			if mps > 0 {
				pj.ETASeconds = ptr(round1(float64(pr.GetPending()) / mps))
			}
		}
		out.Plan = pj
	}
	for _, mv := range st.InFlight {
		out.InFlight = append(out.InFlight, inFlightJSON{Slot: mv.Slot, From: mv.From, To: mv.To,
			Phase: mv.Phase, Bytes: mv.Bytes, BytesCopied: mv.BytesCopied})
	}

	if hist, err := h.cfg.Source.History(ctx, historyLimit); err == nil {
		for i := len(hist) - 1; i >= 0; i-- {
			c := hist[i]
			hj := historyJSON{Version: c.Version, Time: c.At.UTC(), Kind: c.Kind, From: c.From, To: c.To, Node: c.Node,
				PlanID: c.PlanID, By: c.By, Reason: c.Reason}
			if c.From != "" || c.To != "" || c.MoveID != "" {
				s := c.Slot.Int()
				hj.Slot = &s
			}
			out.History = append(out.History, hj)
		}
	} else {
		h.cfg.Logger.Debug("console: history", "err", err)
	}

	// Hot slots by ops, then bytes; hot keys by rate.
	ps := slotLoads(m, lv)
	var hot []hotSlotJSON
	for s, l := range ps {
		if l != nil && (l.Ops() > 0 || l.Bytes > 0) {
			hot = append(hot, hotSlotJSON{Slot: s, Owner: m.OwnerID(slots.MustNew(s)), Keys: l.Keys, Bytes: l.Bytes, Ops: round1(l.Ops())})
		}
	}
	slices.SortFunc(hot, func(a, b hotSlotJSON) int {
		return cmp.Or(cmp.Compare(b.Ops, a.Ops), cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Slot, b.Slot))
	})
	out.Load.HotSlots = append(out.Load.HotSlots, hot[:min(len(hot), hotLimit)]...)
	for _, n := range lv.Nodes {
		for _, k := range n.HotKeys {
			out.Load.HotKeys = append(out.Load.HotKeys, hotKeyJSON{Key: k.Key, Slot: int(k.Slot), Node: n.ID, Rate: round1(k.Rate)})
		}
	}
	slices.SortFunc(out.Load.HotKeys, func(a, b hotKeyJSON) int {
		return cmp.Or(cmp.Compare(b.Rate, a.Rate), cmp.Compare(a.Key, b.Key))
	})
	out.Load.HotKeys = out.Load.HotKeys[:min(len(out.Load.HotKeys), hotLimit)]
	return out, nil
}

// view reads the load view; the zero View (every slot unmeasured) without
// a LoadSource or when it fails.
func (h *Handler) view(ctx context.Context) load.View {
	if h.cfg.Load == nil {
		return load.View{}
	}
	v, err := h.cfg.Load.View(ctx)
	if err != nil {
		h.cfg.Logger.Debug("console: load view", "err", err)
		return load.View{}
	}
	return v
}
