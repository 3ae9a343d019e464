package planner

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slotd/slotd/slots"
)

// The load plans' scenarios: their lines in testdata, the workloads they
// draw, the checks every load plan must hold and its summary.

// Scenario lines for load plans (see parseScenario for the others):
//
//	mode slots|bytes|ops|auto
//	tolerance F
//	maxbytes N
//	maxmoves N
//	report NODE                       the node reported (slots not listed: empty, idle)
//	load NODE RANGES [bytes=B] [ops=O] [reads=R] [writes=W] [keys=K]   per slot
//	hotkey NODE KEY RATE              one of the node's hottest keys
//	zipf keys=N s=S ops=O minv=B maxv=B seed=N [tag=T tagshare=F tagkeys=N] [only=NODE,...]
//	                                  a Zipfian workload over the owners of the table
var scenarioLoads = map[*Input]map[string]map[uint16]SlotLoad{}

func parseLoadLine(t *testing.T, in *Input, f []string) bool {
	t.Helper()
	acc := scenarioLoads[in]
	if acc == nil {
		acc = map[string]map[uint16]SlotLoad{}
		scenarioLoads[in] = acc
	}
	node := func(id string) map[uint16]SlotLoad {
		if acc[id] == nil {
			acc[id] = map[uint16]SlotLoad{}
		}
		if in.Loads == nil {
			in.Loads = map[string]NodeLoad{}
		}
		if _, ok := in.Loads[id]; !ok {
			in.Loads[id] = NodeLoad{}
		}
		return acc[id]
	}
	num := func(v string) float64 {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("bad number %q", v)
		}
		return x
	}
	switch f[0] {
	case "mode":
		in.BalanceBy = BalanceBy(f[1])
	case "tolerance":
		in.Tolerance = num(f[1])
	case "maxbytes":
		in.MaxBytes = int64(num(f[1]))
	case "maxmoves":
		in.MaxMoves = int(num(f[1]))
	case "report":
		node(f[1])
	case "load":
		m := node(f[1])
		set := mustSet(t, f[2])
		for sl := range set.All() {
			l := m[sl.Uint16()]
			l.Slot = sl.Uint16()
			for _, kv := range f[3:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "bytes":
					l.Bytes = num(v)
				case "ops":
					l.Reads, l.Writes = num(v)*0.8, num(v)*0.2
				case "reads":
					l.Reads = num(v)
				case "writes":
					l.Writes = num(v)
				case "keys":
					l.Keys = num(v)
				default:
					t.Fatalf("unknown load field %q", kv)
				}
			}
			m[sl.Uint16()] = l
		}
	case "hotkey":
		node(f[1])
		nl := in.Loads[f[1]]
		nl.HotKeys = append(nl.HotKeys, HotKey{Key: f[2], Rate: num(f[3]), Slot: slots.ForString(f[2]).Uint16()})
		in.Loads[f[1]] = nl
	case "zipf":
		opt := map[string]string{}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			opt[k] = v
		}
		var only []string
		if opt["only"] != "" {
			only = strings.Split(opt["only"], ",")
		}
		w := Workload{Keys: int(num(opt["keys"])), S: num(opt["s"]), Ops: num(opt["ops"]),
			MinValue: int(num(opt["minv"])), MaxValue: int(num(opt["maxv"])), Seed: uint64(num(opt["seed"])), Tag: opt["tag"]}
		if opt["tagshare"] != "" {
			w.TagShare, w.TagKeys = num(opt["tagshare"]), int(num(opt["tagkeys"]))
		}
		for id, nl := range w.Loads(in.Owners) {
			if len(only) > 0 && !slices.Contains(only, id) {
				continue
			}
			m := node(id)
			for _, l := range nl.Slots {
				m[l.Slot] = l
			}
			cur := in.Loads[id]
			cur.HotKeys = append(cur.HotKeys, nl.HotKeys...)
			in.Loads[id] = cur
		}
	default:
		return false
	}
	return true
}

func finishLoads(in *Input) {
	acc := scenarioLoads[in]
	delete(scenarioLoads, in)
	for id, m := range acc {
		nl := in.Loads[id]
		for _, s := range slices.Sorted(maps.Keys(m)) {
			nl.Slots = append(nl.Slots, m[s])
		}
		in.Loads[id] = nl
	}
}

// Workload is a synthetic key population for tests and benchmarks: Keys
// keys with Zipfian popularity (exponent S) sharing Ops requests per
// second, values of MinValue-MaxValue bytes; optionally TagKeys keys under
// the hash tag Tag carrying TagShare of all requests.
type Workload struct {
	Keys               int
	S, Ops             float64
	MinValue, MaxValue int
	Seed               uint64
	Tag                string
	TagShare           float64
	TagKeys            int
}

// Loads returns each owner's report for the table owners.
func (w Workload) Loads(owners []string) map[string]NodeLoad {
	r := rand.New(rand.NewPCG(w.Seed, 14))
	per := make([]SlotLoad, slots.Count)
	for s := range per {
		per[s].Slot = uint16(s)
	}
	var norm float64
	for i := range w.Keys {
		norm += math.Pow(float64(i+1), -w.S)
	}
	type hk struct {
		key  string
		rate float64
	}
	var hot []hk
	add := func(key string, rate float64) {
		s := slots.ForString(key).Int()
		size := float64(w.MinValue + r.IntN(w.MaxValue-w.MinValue+1))
		per[s].Keys++
		per[s].Bytes += size + float64(len(key))
		per[s].Reads += rate * 0.9
		per[s].Writes += rate * 0.1
		if len(hot) < 64 || rate > hot[len(hot)-1].rate {
			pos, _ := slices.BinarySearchFunc(hot, rate, func(h hk, x float64) int { return cmp.Compare(x, h.rate) })
			hot = slices.Insert(hot, pos, hk{key, rate})
			hot = hot[:min(len(hot), 64)]
		}
	}
	rest := w.Ops * (1 - w.TagShare)
	for i := range w.Keys {
		add(fmt.Sprintf("key:%d", i), rest*math.Pow(float64(i+1), -w.S)/norm)
	}
	for i := range w.TagKeys {
		add(fmt.Sprintf("{%s}:%d", w.Tag, i), w.Ops*w.TagShare/float64(w.TagKeys))
	}
	out := map[string]NodeLoad{}
	for s, l := range per {
		nl := out[owners[s]]
		if l.Keys > 0 {
			nl.Slots = append(nl.Slots, l)
		}
		out[owners[s]] = nl
	}
	for _, h := range hot {
		id := owners[slots.ForString(h.key).Int()]
		nl := out[id]
		if len(nl.HotKeys) < 8 {
			nl.HotKeys = append(nl.HotKeys, HotKey{Key: h.key, Rate: h.rate, Slot: slots.ForString(h.key).Uint16()})
		}
		out[id] = nl
	}
	return out
}

// checkLoadPlan asserts what every load plan must hold: each move takes a
// slot from its owner at that point, no slot moves twice, nothing moves
// out of a down node or an active node of unknown load, nothing moves onto
// a node that is not active or whose load is unknown, busy slots stay, and
// draining nodes end empty of every slot not busy (unless the budget ran out).
func checkLoadPlan(t *testing.T, in Input, p *Plan) {
	t.Helper()
	state := map[string]string{}
	for _, n := range in.Nodes {
		state[n.ID] = n.State
	}
	known := func(id string) bool {
		if _, ok := in.Loads[id]; ok {
			return true
		}
		return !slices.Contains(in.Owners, id)
	}
	owners := slices.Clone(in.Owners)
	moved := map[int]bool{}
	for i, m := range p.Moves {
		switch {
		case moved[m.Slot]:
			t.Fatalf("move %d: slot %d moved twice", i, m.Slot)
		case owners[m.Slot] != m.From:
			t.Fatalf("move %d: slot %d owned by %s, plan says %s", i, m.Slot, owners[m.Slot], m.From)
		case in.Busy != nil && in.Busy.Contains(slots.MustNew(m.Slot)):
			t.Fatalf("move %d: slot %d is busy", i, m.Slot)
		case state[m.From] == StateDown:
			t.Fatalf("move %d: slot %d out of down node %s", i, m.Slot, m.From)
		case state[m.From] == StateActive && !known(m.From):
			t.Fatalf("move %d: slot %d out of %s, whose load is unknown", i, m.Slot, m.From)
		case state[m.To] != StateActive || !known(m.To):
			t.Fatalf("move %d: slot %d onto %s (%s, known %v)", i, m.Slot, m.To, state[m.To], known(m.To))
		case m.Reason == "":
			t.Fatalf("move %d: no reason", i)
		}
		moved[m.Slot] = true
		owners[m.Slot] = m.To
	}
	count := map[string]int{}
	for s, o := range owners {
		if state[o] == StateDraining && (in.Busy == nil || !in.Busy.Contains(slots.MustNew(s))) && p.Note != "stopped at the budget" {
			t.Fatalf("slot %d left on draining node %s", s, o)
		}
		count[o]++
	}
	for _, c := range p.Nodes {
		if count[c.ID] != c.SlotsAfter {
			t.Fatalf("node %s: plan says %d slots after, applying it gives %d", c.ID, c.SlotsAfter, count[c.ID])
		}
	}
}

func summarizeLoad(p *Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "balance by %s, tolerance %g: moves %d, bytes %d, estimate %s\n", p.BalanceBy, p.Tolerance, len(p.Moves), p.TotalBytes, p.Estimate)
	fmt.Fprintf(&b, "note: %s\n", p.Note)
	if len(p.Unknown) > 0 {
		fmt.Fprintf(&b, "unknown: %s\n", strings.Join(p.Unknown, ", "))
	}
	for _, h := range p.HotSpots {
		fmt.Fprintf(&b, "hot spot: slot %d on %s, %s %.2fx its share, tag %q\n", h.Slot, h.Node, h.Dimension, h.Share, h.Tag)
	}
	for _, x := range p.Blocked {
		fmt.Fprintf(&b, "blocked %s %d slots %s\n", x.Node, x.Count, x.Slots)
	}
	for _, n := range p.Nodes {
		if !n.LoadKnown {
			fmt.Fprintf(&b, "node %s %s w=%d slots %d -> %d load unknown\n", n.ID, n.State, n.Weight, n.SlotsBefore, n.SlotsAfter)
			continue
		}
		fmt.Fprintf(&b, "node %s %s w=%d slots %d -> %d bytes %.2f -> %.2f ops %.2f -> %.2f\n", n.ID, n.State, n.Weight, n.SlotsBefore, n.SlotsAfter,
			n.RatioBefore.Bytes, n.RatioAfter.Bytes, n.RatioBefore.Ops, n.RatioAfter.Ops)
	}
	for _, m := range p.Moves[:min(6, len(p.Moves))] {
		fmt.Fprintf(&b, "move %d %s -> %s %dB: %s\n", m.Slot, m.From, m.To, m.Bytes, m.Reason)
	}
	return b.String()
}
