package load

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/slots"
)

// Errors of Report. Each leaves the aggregate as it was.
var (
	// ErrInvalid marks a report with a bad value, slot or size.
	ErrInvalid = errors.New("load: invalid report")
	// ErrUnknownNode marks a report from a node that is not registered.
	ErrUnknownNode = errors.New("load: node not registered")
	// ErrBehind marks a report at a map version this replica has not seen
	// yet (or before the directory is bootstrapped): retry later.
	ErrBehind = errors.New("load: this replica's map is behind the report")
)

// Bounds on a report.
const (
	// DefaultInterval is the report interval assumed when a report gives
	// none (node.Reporter's default).
	DefaultInterval = 10 * time.Second
	MinInterval     = time.Second
	MaxInterval     = 10 * time.Minute
	// Expiry is how many report intervals a report lives.
	Expiry = 3
	// MaxHotKeys is the most hot keys a report may carry.
	MaxHotKeys = 256
	// MaxKeyBytes is the longest hot key a report may carry (the node's
	// sketch keeps 128 bytes).
	MaxKeyBytes = 1024
	// DefaultTolerance is the band View uses to name hot spots: a slot
	// whose load alone exceeds its node's fair share by more than this.
	DefaultTolerance = planner.DefaultTolerance
)

// Map is what reports are checked against: the replica's current map and
// the slots whose owner changed after an older version. grpcapi.Hub is one.
type Map interface {
	// Current returns the newest map, nil before the directory is
	// bootstrapped.
	Current() *slotmap.Map
	// ChangedSince returns the slots whose owner changed after version v,
	// up to the current map; ok is false when that is no longer known (v
	// is too old) and every slot must be taken as changed.
	ChangedSince(v uint64) (changed slots.Set, ok bool)
}

// Config configures an Aggregator.
type Config struct {
	// Map checks reports (required).
	Map Map
	// Tolerance names hot spots in View (default DefaultTolerance).
	Tolerance float64
}

// Windows of the stores' decaying averages (node.ShortWindow, LongWindow).
const (
	shortWindow = 60.0  // seconds
	longWindow  = 600.0 // seconds
)

// continued is the slot's load as if it had not moved: the new owner's
// rates, means over the m seconds since it gained the slot, continue the
// averages prior (its previous owner's last) as those would have gone on,
// prior*e^(-m/W) + new*(1-e^(-m/W)) per window W. Sizes are the new
// owner's.
func continued(prior, cur planner.SlotLoad) planner.SlotLoad {
	m := cur.Measured
	f1, f10 := math.Exp(-m/shortWindow), math.Exp(-m/longWindow)
	out := cur
	out.Reads1m = prior.Reads1m*f1 + cur.Reads1m*(1-f1)
	out.Writes1m = prior.Writes1m*f1 + cur.Writes1m*(1-f1)
	out.Reads = prior.Reads*f10 + cur.Reads*(1-f10)
	out.Writes = prior.Writes*f10 + cur.Writes*(1-f10)
	return out
}

// report is a node's last accepted report.
type report struct {
	received time.Time
	version  uint64
	interval time.Duration
	slots    []planner.SlotLoad // in slot order
	hot      []planner.HotKey   // hottest first
}

func (r *report) known(now time.Time) bool {
	return now.Sub(r.received) < Expiry*r.interval
}

// Aggregator holds the last report of every node. Safe for concurrent use.
//
// Load follows the slot: a slot that changed owner after its new owner's
// last report counts at the new owner with what its previous owner last
// reported of it, until the new owner reports it (or the previous owner's
// report expires). A node that owns no slot and never reported is known to
// be empty, once a node that owns slots is known.
type Aggregator struct {
	cfg Config

	mu      sync.Mutex // guards reports and last
	reports map[string]*report
	// last is, per slot, what the last accepted report that listed it
	// said of it: kept after its node stops listing it (the slot moved),
	// until it expires as that report would.
	last [slots.Count]lastLoad
}

// lastLoad is one slot's load as one node last reported it.
type lastLoad struct {
	node string
	rep  *report // the report it came in: its received time and interval
	load planner.SlotLoad
	// prior is the previous owner's last load of the slot while the owner
	// has measured it for less than priorFor since it gained it: its
	// rates continue prior's (continued).
	prior *planner.SlotLoad
}

// priorFor is how long a slot's previous owner's averages still weigh in
// its new owner's: five of the long window (its weight is then below 1%).
const priorFor = 5 * longWindow

// New returns an empty aggregate: every node unknown.
func New(cfg Config) (*Aggregator, error) {
	if cfg.Map == nil {
		return nil, errors.New("load: Config.Map is required")
	}
	if cfg.Tolerance < 0 || math.IsNaN(cfg.Tolerance) || math.IsInf(cfg.Tolerance, 0) {
		return nil, fmt.Errorf("load: Config.Tolerance %v must be a finite number >= 0", cfg.Tolerance)
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = DefaultTolerance
	}
	return &Aggregator{cfg: cfg, reports: map[string]*report{}}, nil
}

// Report checks r and makes it the node's last report, received at now.
// It returns an error wrapping ErrInvalid, ErrUnknownNode or ErrBehind,
// and then changes nothing. Slots that changed owner after the report's
// version are left out (the node owned them then, not now).
func (a *Aggregator) Report(now time.Time, r *slotdv1.LoadReport) error {
	rep, err := a.check(r)
	if err != nil {
		return err
	}
	rep.received = now
	id := r.GetNodeId()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reports[id] = rep
	for i, sl := range rep.slots {
		l := lastLoad{node: id, rep: rep, load: sl}
		if m := sl.Measured; m > 0 && m < priorFor {
			// Gained a short while ago: its averages go on from what its
			// previous owner last said (held since its first report here).
			switch prev := a.last[sl.Slot]; {
			case prev.node != "" && prev.node != id && now.Sub(prev.rep.received) < time.Duration(longWindow)*time.Second:
				p := prev.load
				l.prior = &p
			case prev.node == id && prev.prior != nil:
				l.prior = prev.prior
			}
			if l.prior != nil {
				l.load = continued(*l.prior, sl)
				rep.slots[i] = l.load
			}
		}
		a.last[sl.Slot] = l
	}
	return nil
}

// lists returns r's load of slot s, if it lists it.
func (r *report) lists(s uint16) (planner.SlotLoad, bool) {
	i, ok := slices.BinarySearchFunc(r.slots, s, func(l planner.SlotLoad, s uint16) int { return cmp.Compare(l.Slot, s) })
	if !ok {
		return planner.SlotLoad{}, false
	}
	return r.slots[i], true
}

// nodeSlots is what the aggregate knows of one node of the map at one
// moment: its live report (nil if none), the load of the slots it owns now
// (its own report's, then what it carried over from previous owners), and
// whether that is known.
type nodeSlots struct {
	rep     *report
	known   bool
	owned   int
	slots   []planner.SlotLoad // in slot order
	carried int                // of slots, how many come from a previous owner's report
}

// effective computes nodeSlots for every node of m; a.mu must be held.
func (a *Aggregator) effective(m *slotmap.Map, now time.Time) map[string]*nodeSlots {
	out := map[string]*nodeSlots{}
	for _, n := range m.Nodes() {
		ns := &nodeSlots{}
		if r := a.reports[n.ID]; r != nil && r.known(now) {
			ns.rep = r
		}
		out[n.ID] = ns
	}
	for i := range slots.Count {
		s := uint16(i)
		owner := m.OwnerID(slots.MustNew(i))
		ns := out[owner]
		if ns == nil {
			continue // unassigned, or a node the map does not list
		}
		ns.owned++
		if ns.rep != nil {
			if l, ok := ns.rep.lists(s); ok {
				ns.slots = append(ns.slots, l)
				continue
			}
		}
		// Not in its owner's report: it moved there after that report
		// (or it is young there, or idle). What its previous owner last
		// said of it counts here until the owner lists it or that
		// expires.
		if l := a.last[s]; l.node != "" && l.node != owner && l.rep.known(now) {
			ns.slots = append(ns.slots, l.load)
			ns.carried++
		}
	}

	// A node owning nothing is known empty, once some node owning slots
	// is measured: before that, there is nothing to compare it with.
	measured := false
	for _, ns := range out {
		measured = measured || (ns.rep != nil && ns.owned > 0)
	}
	for _, ns := range out {
		ns.known = ns.rep != nil || (ns.owned == 0 && measured)
	}
	return out
}

func (a *Aggregator) check(r *slotdv1.LoadReport) (*report, error) {
	id := r.GetNodeId()
	if id == "" {
		return nil, fmt.Errorf("%w: node_id is empty", ErrInvalid)
	}
	if n := len(r.GetSlots()); n > slots.Count {
		return nil, fmt.Errorf("%w: %d slots from %s, at most %d", ErrInvalid, n, id, slots.Count)
	}
	if n := len(r.GetHotKeys()); n > MaxHotKeys {
		return nil, fmt.Errorf("%w: %d hot keys from %s, at most %d", ErrInvalid, n, id, MaxHotKeys)
	}
	interval := DefaultInterval
	if r.GetInterval() != nil {
		if err := r.GetInterval().CheckValid(); err != nil {
			return nil, fmt.Errorf("%w: interval from %s: %v", ErrInvalid, id, err)
		}
		interval = r.GetInterval().AsDuration()
		if interval < MinInterval || interval > MaxInterval {
			return nil, fmt.Errorf("%w: interval %v from %s, want %v to %v", ErrInvalid, interval, id, MinInterval, MaxInterval)
		}
	}
	v := r.GetVersion()
	if v == 0 {
		return nil, fmt.Errorf("%w: report from %s has no map version", ErrInvalid, id)
	}
	m := a.cfg.Map.Current()
	if m == nil || m.Empty() {
		return nil, fmt.Errorf("%w: no slot map yet", ErrBehind)
	}
	if _, ok := m.Node(id); !ok {
		return nil, fmt.Errorf("%w: %s (register it first)", ErrUnknownNode, id)
	}
	if v > m.Version() {
		return nil, fmt.Errorf("%w: report from %s at version %d, this replica is at %d", ErrBehind, id, v, m.Version())
	}
	var changed slots.Set
	if v < m.Version() {
		var ok bool
		if changed, ok = a.cfg.Map.ChangedSince(v); !ok {
			return nil, fmt.Errorf("%w: report from %s at version %d, too old for this replica at %d to check", ErrBehind, id, v, m.Version())
		}
	}
	// What it lists, every value checked as the planner checks a load.
	nl, err := reported(r)
	if err != nil {
		return nil, fmt.Errorf("%w from %s: %v", ErrInvalid, id, err)
	}
	// owned says whether slot n may be reported: it changed hands after
	// the report's version (then it is skipped: the report cannot speak for
	// its present owner), or the node owns it now, hence at v.
	owned := func(what string, n uint16) (keep bool, err error) {
		s := slots.MustNew(int(n))
		switch o := m.OwnerID(s); {
		case changed.Contains(s):
			return false, nil // its owner at v is not known here
		case o == id:
			return true, nil
		default:
			return false, fmt.Errorf("%w: %s slot %d is owned by %s at version %d, not by %s", ErrInvalid, what, n, o, v, id)
		}
	}
	rep := &report{version: v, interval: interval}
	for _, sl := range nl.Slots {
		keep, err := owned("load of", sl.Slot)
		if err != nil {
			return nil, err
		}
		if keep {
			rep.slots = append(rep.slots, sl)
		}
	}
	for _, k := range nl.HotKeys {
		keep, err := owned("hot key's", k.Slot)
		if err != nil {
			return nil, err
		}
		if keep {
			rep.hot = append(rep.hot, k)
		}
	}
	sort.Slice(rep.slots, func(i, j int) bool { return rep.slots[i].Slot < rep.slots[j].Slot })
	sort.SliceStable(rep.hot, func(i, j int) bool { return rep.hot[i].Rate > rep.hot[j].Rate })
	return rep, nil
}

// reported is every slot and hot key r lists, as the node sent them: the
// slot numbers in range, each hot key in the slot it names (unless it is
// truncated) and every value valid (planner.NodeLoad.Validate).
func reported(r *slotdv1.LoadReport) (planner.NodeLoad, error) {
	nl := planner.NodeLoad{Slots: make([]planner.SlotLoad, 0, len(r.GetSlots()))}
	for _, sl := range r.GetSlots() {
		if sl.GetSlot() >= slots.Count {
			return nl, fmt.Errorf("load of slot %d is out of range 0-%d", sl.GetSlot(), slots.Count-1)
		}
		nl.Slots = append(nl.Slots, planner.SlotLoad{
			Slot: uint16(sl.GetSlot()), Keys: float64(sl.GetKeys()), Bytes: float64(sl.GetBytes()),
			Reads1m: sl.GetReads_1M(), Writes1m: sl.GetWrites_1M(), Reads: sl.GetReads_10M(), Writes: sl.GetWrites_10M(),
			Tag: sl.GetTag(), Measured: sl.GetMeasuredSeconds(),
		})
	}
	for _, k := range r.GetHotKeys() {
		switch {
		case k.GetSlot() >= slots.Count:
			return nl, fmt.Errorf("hot key's slot %d is out of range 0-%d", k.GetSlot(), slots.Count-1)
		case len(k.GetKey()) == 0:
			return nl, errors.New("empty hot key")
		case len(k.GetKey()) > MaxKeyBytes:
			return nl, fmt.Errorf("hot key of %d bytes, at most %d", len(k.GetKey()), MaxKeyBytes)
		case !k.GetTruncated() && slots.ForKey(k.GetKey()).Uint16() != uint16(k.GetSlot()):
			return nl, fmt.Errorf("hot key %q is in slot %d, not %d", k.GetKey(), slots.ForKey(k.GetKey()).Int(), k.GetSlot())
		}
		nl.HotKeys = append(nl.HotKeys, planner.HotKey{Key: string(k.GetKey()), Slot: uint16(k.GetSlot()), Rate: k.GetRate(), Err: k.GetError(), Truncated: k.GetTruncated()})
	}
	return nl, nl.Validate()
}

// NodeLoads returns the load of every known node of the map (see
// Aggregator: a live report, or no slot at all): the planner's input.
// Reads and Writes are the ~10-minute averages. A node missing from the
// map is unknown. A slot counts at its owner now: one that left a node
// since its report is its new owner's, with the last load reported of it.
func (a *Aggregator) NodeLoads(now time.Time) map[string]planner.NodeLoad {
	out := map[string]planner.NodeLoad{}
	m := a.cfg.Map.Current()
	if m == nil || m.Empty() {
		return out
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, ns := range a.effective(m, now) {
		if !ns.known {
			continue
		}
		out[id] = planner.NodeLoad{Slots: ns.slots, HotKeys: ns.ownedHot(m, id)}
	}
	return out
}

// ownedHot is the node's reported hot keys in slots it owns in m now.
func (ns *nodeSlots) ownedHot(m *slotmap.Map, id string) []planner.HotKey {
	if ns.rep == nil {
		return nil
	}
	var out []planner.HotKey
	for _, k := range ns.rep.hot {
		if owns(m, id, k.Slot) {
			out = append(out, k)
		}
	}
	return out
}

// owns says whether node id owns slot n in m (true without a map).
func owns(m *slotmap.Map, id string, n uint16) bool {
	return m == nil || m.Empty() || m.OwnerID(slots.MustNew(int(n))) == id
}
