package console

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/slots"
)

// The JSON the page polls. docs/console.md documents every field; keep
// the two in step.

// mapJSON is GET /api/v1/map.
type mapJSON struct {
	Version   uint64 `json:"version"`
	ClusterID string `json:"cluster_id"`
	// Nodes are the node ids, sorted; Owners[s] indexes them (-1: none).
	Nodes      []string        `json:"nodes"`
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
	Now         time.Time       `json:"now"`
	Version     uint64          `json:"version"`
	ClusterID   string          `json:"cluster_id"`
	Server      string          `json:"server"`
	MoverLeader string          `json:"mover_leader"`
	Throttle    uint64          `json:"throttle_bytes_per_second"`
	Nodes       []nodeJSON      `json:"nodes"`
	Plan        *planJSON       `json:"plan"`
	InFlight    []inFlightJSON  `json:"in_flight"`
	History     []historyJSON   `json:"history"`
	Load        loadSummaryJSON `json:"load"`
}

type nodeJSON struct {
	ID          string     `json:"id"`
	Address     string     `json:"address"`
	Zone        string     `json:"zone"`
	Weight      uint32     `json:"weight"`
	State       string     `json:"state"`
	Slots       uint32     `json:"slots"`
	TargetSlots uint32     `json:"target_slots"`
	SlotRatio   float64    `json:"slot_ratio"`
	Heartbeat   *time.Time `json:"last_heartbeat"`
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

func enumName(s fmt.Stringer, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), prefix))
}

func buildMap(m *slotmap.Map) mapJSON {
	out := mapJSON{Nodes: []string{}, Owners: make([]int, slots.Count), Migrations: []migrationJSON{}}
	if m == nil {
		for i := range out.Owners {
			out.Owners[i] = -1
		}
		return out
	}
	out.Version, out.ClusterID = m.Version(), m.ClusterID()
	idx := map[string]int{}
	for _, n := range m.Nodes() {
		out.Nodes = append(out.Nodes, n.ID)
	}
	slices.Sort(out.Nodes)
	for i, id := range out.Nodes {
		idx[id] = i
	}
	for s := range slots.Count {
		i, ok := idx[m.OwnerID(slots.MustNew(s))]
		if !ok {
			i = -1
		}
		out.Owners[s] = i
	}
	for _, mg := range m.Migrations() {
		out.Migrations = append(out.Migrations, migrationJSON{Slot: mg.Slot.Int(), From: mg.From, To: mg.To, Phase: enumName(mg.Phase, "MOVE_PHASE_")})
	}
	return out
}

// perSlot is the measured load of every slot: nil where unmeasured.
type perSlot [slots.Count]*planner.SlotLoad

// slotLoads spreads the nodes' reports over the slots of map m: a slot is
// measured when its owner reported; a slot absent from that report is
// empty and idle.
func slotLoads(m *slotmap.Map, loads map[string]planner.NodeLoad) *perSlot {
	var out perSlot
	if m == nil || len(loads) == 0 {
		return &out
	}
	byNode := map[string]map[uint16]planner.SlotLoad{}
	for id, nl := range loads {
		sl := make(map[uint16]planner.SlotLoad, len(nl.Slots))
		for _, s := range nl.Slots {
			sl[s.Slot] = s
		}
		byNode[id] = sl
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

func ptr(f float64) *float64 { return &f }

// buildStatus assembles the status from the source's reads.
func (h *Handler) buildStatus(ctx context.Context) (statusJSON, error) {
	st, err := h.cfg.Source.Status(ctx)
	if err != nil {
		return statusJSON{}, err
	}
	now := h.cfg.Now()
	out := statusJSON{Version: st.GetVersion(), Server: st.GetServer(), MoverLeader: st.GetMoverLeader(),
		Throttle: st.GetThrottle().GetDefaultBytesPerSecond(), Nodes: []nodeJSON{}, InFlight: []inFlightJSON{}, History: []historyJSON{},
		Load: loadSummaryJSON{Measured: []string{}, HotSlots: []hotSlotJSON{}, HotKeys: []hotKeyJSON{}}}
	m := h.cfg.Source.Map()
	if m != nil {
		out.ClusterID = m.ClusterID()
	}

	heartbeats := map[string]*time.Time{}
	if ln, err := h.cfg.Source.Nodes(ctx); err == nil {
		for _, ni := range ln.GetNodes() {
			if hb := ni.GetLastHeartbeat(); hb != nil {
				t := hb.AsTime().UTC()
				heartbeats[ni.GetNode().GetId()] = &t
			}
		}
	} else {
		h.cfg.Logger.Debug("console: list nodes", "err", err)
	}

	loads := h.loads(ctx)
	type sums struct{ keys, bytes, ops float64 }
	perNode := map[string]sums{}
	for id, nl := range loads {
		var s sums
		for _, l := range nl.Slots {
			s.keys += l.Keys
			s.bytes += l.Bytes
			s.ops += l.Ops()
		}
		perNode[id] = s
		out.Load.Measured = append(out.Load.Measured, id)
	}
	slices.Sort(out.Load.Measured)
	// Ratios against the mean of the measured nodes that take slots.
	var meanBytes, meanOps float64
	n := 0
	for _, nl := range st.GetNodes() {
		if s, ok := perNode[nl.GetNode().GetId()]; ok && nl.GetNode().GetState() == slotdv1.NodeState_NODE_STATE_ACTIVE {
			meanBytes += s.bytes
			meanOps += s.ops
			n++
		}
	}
	if n > 0 {
		meanBytes /= float64(n)
		meanOps /= float64(n)
	}
	for _, nl := range st.GetNodes() {
		nd := nl.GetNode()
		j := nodeJSON{ID: nd.GetId(), Address: nd.GetAddress(), Zone: nd.GetZone(), Weight: nd.GetWeight(),
			State: enumName(nd.GetState(), "NODE_STATE_"), Slots: nl.GetSlots(), TargetSlots: nl.GetTargetSlots(),
			SlotRatio: nl.GetLoad(), Heartbeat: heartbeats[nd.GetId()]}
		if s, ok := perNode[nd.GetId()]; ok {
			j.Keys, j.Bytes, j.Ops = ptr(s.keys), ptr(s.bytes), ptr(round1(s.ops))
			if meanBytes > 0 {
				j.BytesRatio = ptr(float64(int64(s.bytes/meanBytes*1000+0.5)) / 1000)
			}
			if meanOps > 0 {
				j.OpsRatio = ptr(float64(int64(s.ops/meanOps*1000+0.5)) / 1000)
			}
		}
		out.Nodes = append(out.Nodes, j)
	}
	slices.SortFunc(out.Nodes, func(a, b nodeJSON) int { return cmp.Compare(a.ID, b.ID) })

	if p := st.GetActivePlan(); p != nil {
		pr := p.GetProgress()
		pj := &planJSON{ID: p.GetId(), State: enumName(p.GetState(), "PLAN_STATE_"), Reason: p.GetReason(),
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
	for _, mv := range st.GetInFlight() {
		out.InFlight = append(out.InFlight, inFlightJSON{Slot: mv.GetSlot(), From: mv.GetFrom(), To: mv.GetTo(),
			Phase: enumName(mv.GetPhase(), "MOVE_PHASE_"), Bytes: mv.GetBytes(), BytesCopied: mv.GetBytesCopied()})
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
	ps := slotLoads(m, loads)
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
	for id, nl := range loads {
		for _, k := range nl.HotKeys {
			out.Load.HotKeys = append(out.Load.HotKeys, hotKeyJSON{Key: k.Key, Slot: int(k.Slot), Node: id, Rate: round1(k.Rate)})
		}
	}
	slices.SortFunc(out.Load.HotKeys, func(a, b hotKeyJSON) int {
		return cmp.Or(cmp.Compare(b.Rate, a.Rate), cmp.Compare(a.Key, b.Key))
	})
	out.Load.HotKeys = out.Load.HotKeys[:min(len(out.Load.HotKeys), hotLimit)]
	return out, nil
}

// loads reads the load reports; none (nil) without a LoadSource or when it
// fails, which the page shows as unmeasured.
func (h *Handler) loads(ctx context.Context) map[string]planner.NodeLoad {
	if h.cfg.Load == nil {
		return nil
	}
	l, err := h.cfg.Load.Loads(ctx)
	if err != nil {
		h.cfg.Logger.Debug("console: load reports", "err", err)
		return nil
	}
	return l
}
