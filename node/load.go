package node

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/slotd/slotd/slots"
)

// Windows of the decaying averages of request rates.
const (
	ShortWindow = time.Minute
	LongWindow  = 10 * time.Minute
)

// Size passes read every key, so they are paced by their own cost: the
// next one waits sizeCost times as long as the last took (at most 5% of a
// core), and at least sizeMinEvery, at most sizeMaxEvery.
const (
	sizeCost     = 20
	sizeMinEvery = 2 * time.Second
	sizeMaxEvery = 5 * time.Minute
)

// SlotSizer is implemented by a Store that can size every slot in one pass
// (slotkv walks its file once). Without it, Load asks Store.SlotSize for
// each owned slot.
type SlotSizer interface {
	// SlotSizes calls fn once for every slot holding data, with its number
	// of keys and the bytes their keys and values take.
	SlotSizes(ctx context.Context, fn func(s slots.Slot, keys, bytes int64)) error
}

// SlotLoad is the measured load of one slot.
type SlotLoad struct {
	Slot slots.Slot
	// Keys and Bytes (keys and values) the slot holds, as of the last
	// size pass (2 s old for a small store; see Load).
	Keys, Bytes int64
	// Reads served and writes (mutations applied) per second, decaying
	// averages over about ShortWindow (1m) and LongWindow (10m).
	Reads1m, Writes1m, Reads10m, Writes10m float64
	// Tag is the hash tag the slot's hot keys share ("" when none do or the
	// slot has no hot key).
	Tag string
	// MeasuredSeconds is how long the rates cover since the node gained
	// the slot; 0 when it owned it since it started.
	MeasuredSeconds float64
}

// Load is a node's measured load at one moment.
type Load struct {
	// Version is the oldest map version at which an owned slot was read:
	// every slot listed was owned at Version or changed hands after it.
	Version uint64
	// At is when the load was read (the node's clock).
	At time.Time
	// Slots lists the owned slots with data or traffic, in slot order.
	Slots []SlotLoad
	// HotKeys are the hottest keys of owned slots, hottest first.
	HotKeys []HotKey
}

// loadTracker folds the request counters into decaying averages. The
// counters themselves live in Node (one atomic add per request per slot);
// everything here runs in the fold, every Config.LoadInterval.
type loadTracker struct {
	hot hotKeys

	mu         sync.Mutex // guards everything below
	started    time.Time  // first fold: averages are exact means until a window has passed
	lastFold   time.Time
	lastReads  [slots.Count]uint64
	lastWrites [slots.Count]uint64
	r1, w1     [slots.Count]float32
	r10, w10   [slots.Count]float32
	hotAge     float64 // seconds of history the sketch holds, capped by its decay
	// gained is, per slot this node gained while running, when it gained
	// it (zero: owned since the start, or never): its averages count from
	// then, not from the start, so that a slot that just arrived reads its
	// real rate, not a fraction of it. measured is how many seconds of its
	// rates the averages hold (0 until the first fold after the gain).
	gained   [slots.Count]time.Time
	measured [slots.Count]float32
	// seeded says a gained slot's averages started from its source's
	// (SlotRates handed over with the move): they go on as exponential
	// averages, and the reports give no measured age for them.
	seeded [slots.Count]bool
	// history is, for a seeded slot, the seconds of history its source's
	// averages covered at the fence: its averages go on with the weights
	// of history + the time since the gain, as the source's would have.
	history [slots.Count]float32
	// gains counts the gains recorded (gain calls that gained a slot), and
	// lastGain is the last one's time: a Reporter reports early once a
	// fold has measured them (GainsMeasured).
	gains    uint64
	lastGain time.Time
	// sized says a slot gained after the last size pass was sized alone
	// since its gain (guarded by sizeMu).
	sized [slots.Count]bool

	sizeMu   sync.Mutex // guards the sizes; held during a size pass
	sizedAt  time.Time
	sizeWait time.Duration // before the next pass, from the last one's cost
	keys     [slots.Count]int64
	bytes    [slots.Count]int64
}

// countRead counts one served read of key in slot s: one atomic add, and
// every HotKeySampling-th read of the slot feeds the sketch.
func (n *Node) countRead(s slots.Slot, key []byte) {
	if c := n.reads[s.Int()].Add(1); c%HotKeySampling == 0 {
		n.load.hot.add(s, key)
	}
}

// countWrites counts k mutations applied to slot s; the sketch gets key
// when the count crosses a multiple of HotKeySampling.
func (n *Node) countWrites(s slots.Slot, key []byte, k int) {
	c := n.writes[s.Int()].Add(uint64(k))
	if c/HotKeySampling != (c-uint64(k))/HotKeySampling {
		n.load.hot.add(s, key)
	}
}

// runLoad folds the counters every Config.LoadInterval until ctx is done.
func (n *Node) runLoad(ctx context.Context) {
	n.foldLoad(n.cfg.Clock.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-n.cfg.Clock.After(n.cfg.LoadInterval):
			n.foldLoad(now)
		}
	}
}

// foldLoad moves the counts since the last fold into the averages. The
// first fold only sets the starting point. While the tracker is younger
// than a window, an average is the plain mean since the start (an
// exponential average started at zero would read low for many minutes).
func (n *Node) foldLoad(now time.Time) {
	t := &n.load
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lastFold.IsZero() {
		t.started, t.lastFold = now, now
		for i := range t.lastReads {
			t.lastReads[i] = n.reads[i].Load()
			t.lastWrites[i] = n.writes[i].Load()
		}
		return
	}
	dt := now.Sub(t.lastFold).Seconds()
	if dt <= 0 {
		return
	}
	age := now.Sub(t.started).Seconds()
	a1 := weightOfNew(dt, age, ShortWindow.Seconds())
	a10 := weightOfNew(dt, age, LongWindow.Seconds())
	for i := range t.lastReads {
		r, w := n.reads[i].Load(), n.writes[i].Load()
		sdt, a1, a10 := dt, a1, a10
		if g := t.gained[i]; !g.IsZero() {
			// Gained since the start: only the time since then counts
			// (the counts before it are zero: a slot not owned counts no
			// request).
			sage := now.Sub(g).Seconds()
			if sage <= 0 {
				continue
			}
			sdt = min(dt, sage)
			a1, a10 = weightOfNew(sdt, sage, ShortWindow.Seconds()), weightOfNew(sdt, sage, LongWindow.Seconds())
			if t.seeded[i] {
				// The source's averages go on, as if the slot had not moved.
				h := float64(t.history[i]) + sage
				a1, a10 = weightOfNew(sdt, h, ShortWindow.Seconds()), weightOfNew(sdt, h, LongWindow.Seconds())
			}
			t.measured[i] = float32(sage)
		}
		dr, dw := float64(r-t.lastReads[i])/sdt, float64(w-t.lastWrites[i])/sdt
		t.lastReads[i], t.lastWrites[i] = r, w
		if dr == 0 && dw == 0 && t.r10[i] == 0 && t.w10[i] == 0 {
			continue // idle slot: every average is zero and stays so
		}
		t.r1[i] += float32(a1 * (dr - float64(t.r1[i])))
		t.w1[i] += float32(a1 * (dw - float64(t.w1[i])))
		t.r10[i] += float32(a10 * (dr - float64(t.r10[i])))
		t.w10[i] += float32(a10 * (dw - float64(t.w10[i])))
		// Below a request in ten thousand seconds a slot is idle: let it
		// reach zero instead of decaying for ever.
		for _, p := range []*float32{&t.r1[i], &t.w1[i], &t.r10[i], &t.w10[i]} {
			if *p < 1e-4 {
				*p = 0
			}
		}
	}
	t.lastFold = now
	f := decayFactor(dt, ShortWindow.Seconds())
	t.hot.decay(f)
	// The sketch's counts are a sum of decayed samples: in seconds of
	// history, age' = age*f + dt, tending to dt/(1-f) (about a minute).
	t.hotAge = t.hotAge*f + dt
}

// youngFor is how long a gained slot's rates must have been measured
// before Load lists it.
const youngFor = time.Second

// young says whether slot i was gained and is not measured yet: no fold
// has covered youngFor of it, or no size pass has run since the gain.
// Call with mu and sizeMu held.
func (t *loadTracker) young(i int) bool {
	g := t.gained[i]
	unsized := t.sizedAt.Before(g) && !t.sized[i]
	return !g.IsZero() && ((!t.seeded[i] && float64(t.measured[i]) < youngFor.Seconds()) || unsized)
}

// gain records that the node gained slots ss at now (checkGained): their
// averages start again from then.
func (t *loadTracker) gain(ss []slots.Slot, now time.Time, seeds map[slots.Slot]SlotRates) {
	t.mu.Lock()
	if t.lastFold.IsZero() {
		t.mu.Unlock()
		return // not started: every slot counts from the first fold
	}
	for _, s := range ss {
		i := s.Int()
		t.gained[i], t.measured[i] = now, 0
		t.r1[i], t.w1[i], t.r10[i], t.w10[i] = 0, 0, 0, 0
		r, ok := seeds[s]
		t.seeded[i], t.history[i] = ok, 0
		if ok {
			t.r1[i], t.w1[i], t.r10[i], t.w10[i] = float32(r.Reads1m), float32(r.Writes1m), float32(r.Reads10m), float32(r.Writes10m)
			t.history[i] = float32(r.Measured)
		}
	}
	if len(ss) > 0 {
		t.gains++
		t.lastGain = now
	}
	t.mu.Unlock()
	t.sizeMu.Lock() // after mu, never inside it: Load takes sizeMu first
	for _, s := range ss {
		t.sized[s.Int()] = false
	}
	t.sizeMu.Unlock()
}

// SlotRates is one slot's request rates (per second, the decaying
// averages of Load) as its source hands them to its target with a move.
type SlotRates struct {
	Reads1m, Writes1m, Reads10m, Writes10m float64
	// Measured is the seconds of history the averages cover (below a
	// window they are plain means over that time).
	Measured float64
}

// slotRates returns slot s's averages now, with the history they cover:
// those of the last fold, with the requests counted since folded in as a
// fold at now would (a move's fence must hand over the writes of its last
// seconds too: the bulk of a load may not be folded yet).
func (n *Node) slotRates(s slots.Slot, now time.Time) SlotRates {
	t := &n.load
	t.mu.Lock()
	defer t.mu.Unlock()
	i := s.Int()
	r := SlotRates{Reads1m: float64(t.r1[i]), Writes1m: float64(t.w1[i]), Reads10m: float64(t.r10[i]), Writes10m: float64(t.w10[i])}
	if t.lastFold.IsZero() {
		return r
	}
	// The history the averages cover at now, as foldLoad counts it.
	h := now.Sub(t.started).Seconds()
	since := now.Sub(t.lastFold).Seconds()
	if g := t.gained[i]; !g.IsZero() {
		h = now.Sub(g).Seconds()
		if t.seeded[i] {
			h += float64(t.history[i])
		}
		since = min(since, now.Sub(g).Seconds())
	}
	r.Measured = max(h, 0)
	if since <= 0 || h <= 0 {
		return r
	}
	dr := float64(n.reads[i].Load()-t.lastReads[i]) / since
	dw := float64(n.writes[i].Load()-t.lastWrites[i]) / since
	a1, a10 := weightOfNew(since, h, ShortWindow.Seconds()), weightOfNew(since, h, LongWindow.Seconds())
	r.Reads1m += a1 * (dr - r.Reads1m)
	r.Writes1m += a1 * (dw - r.Writes1m)
	r.Reads10m += a10 * (dr - r.Reads10m)
	r.Writes10m += a10 * (dw - r.Writes10m)
	return r
}

// seedRates keeps the rates slot s had at the source of move moveID, for
// the moment the slot becomes this node's (checkGained): a rate that is
// not a number >= 0 is dropped.
func (n *Node) seedRates(s slots.Slot, moveID string, r SlotRates) {
	for _, v := range []float64{r.Reads1m, r.Writes1m, r.Reads10m, r.Writes10m, r.Measured} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > math.MaxFloat32 {
			return
		}
	}
	n.impMu.Lock()
	defer n.impMu.Unlock()
	if n.seeds == nil {
		n.seeds = map[slots.Slot]seed{}
	}
	n.seeds[s] = seed{moveID: moveID, rates: r}
}

// seed is a slot's source's rates, kept until the slot is gained.
type seed struct {
	moveID string
	rates  SlotRates
}

// GainsMeasured returns how many times the node has gained slots while
// running, and whether the last gain is measured now (a fold has covered
// youngFor of it), so that Load lists the slots gained. A Reporter reports
// early then: the slots' new owner says what they hold and carry right
// after a move, not an interval later.
func (n *Node) GainsMeasured() (gains uint64, measured bool) {
	t := &n.load
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gains, t.gains > 0 && t.lastFold.Sub(t.lastGain) >= youngFor
}

// weightOfNew is the weight of the newest interval (dt seconds) in an
// average over window seconds, when age seconds have been seen in all.
func weightOfNew(dt, age, window float64) float64 {
	if age < window {
		return math.Min(1, dt/age)
	}
	return 1 - math.Exp(-dt/window)
}

// Load returns the node's measured load: every slot this node owns that
// holds data or sees traffic, and the hottest keys of those slots. Sizes
// come from the last size pass (one pass through SlotSizer, or
// Store.SlotSize per owned slot), renewed when it is older than twenty
// times what it took (2 s to 5 min). Safe for concurrent
// use; it allocates, the request path does not.
func (n *Node) Load(ctx context.Context) (Load, error) {
	now := n.cfg.Clock.Now()
	owned, version, err := n.ownedSlots()
	if err != nil {
		return Load{}, err
	}
	if err := n.refreshSizes(ctx, now, &owned); err != nil {
		return Load{}, err
	}
	t := &n.load
	out := Load{Version: version, At: now}
	t.sizeMu.Lock()
	t.mu.Lock()
	for s := range owned.All() {
		i := s.Int()
		if t.young(i) {
			// Gained a moment ago: its rates and size are not measured
			// here yet. Left out, it keeps counting what its previous
			// owner last reported of it (load.Aggregator).
			continue
		}
		sl := SlotLoad{
			Slot: s, Keys: t.keys[i], Bytes: t.bytes[i],
			Reads1m: float64(t.r1[i]), Writes1m: float64(t.w1[i]), Reads10m: float64(t.r10[i]), Writes10m: float64(t.w10[i]),
		}
		if !t.seeded[i] {
			sl.MeasuredSeconds = float64(t.measured[i])
		}
		if sl.Keys > 0 || sl.Bytes > 0 || sl.Reads10m > 0 || sl.Writes10m > 0 || sl.Reads1m > 0 || sl.Writes1m > 0 {
			out.Slots = append(out.Slots, sl)
		}
	}
	// The sketch also holds the samples since the last fold.
	hotAge := t.hotAge
	if !t.lastFold.IsZero() && now.After(t.lastFold) {
		hotAge += now.Sub(t.lastFold).Seconds()
	}
	t.mu.Unlock()
	t.sizeMu.Unlock()
	if hotAge > 0 {
		bySlot := map[slots.Slot][]HotKey{}
		for _, k := range t.hot.top(HotKeySampling / hotAge) {
			if owned.Contains(k.Slot) {
				out.HotKeys = append(out.HotKeys, k)
				bySlot[k.Slot] = append(bySlot[k.Slot], k)
			}
		}
		for i := range out.Slots {
			if ks := bySlot[out.Slots[i].Slot]; len(ks) > 0 {
				out.Slots[i].Tag = hashTag(ks)
			}
		}
	}
	return out, nil
}

// ownedSlots returns the slots the map says this node owns and the
// version it says so at: the whole map's when the source has one
// (WholeMap), else the oldest version any slot was answered at.
func (n *Node) ownedSlots() (slots.Set, uint64, error) {
	var owned slots.Set
	if wm, ok := n.cfg.Map.(WholeMap); ok {
		m := wm.Map()
		if m == nil {
			return owned, 0, ErrNoMap
		}
		return m.SlotsOf(n.cfg.ID), m.Version(), nil
	}
	version := uint64(math.MaxUint64)
	for i := range slots.Count {
		s := slots.MustNew(i)
		o, ok := n.cfg.Map.Owner(s)
		if !ok {
			return owned, 0, ErrNoMap
		}
		version = min(version, o.Version)
		if o.ID == n.cfg.ID {
			owned.Add(s)
		}
	}
	return owned, version, nil
}

// refreshSizes renews the slot sizes when the last pass is older than its
// cost allows (sizeCost, sizeMinEvery, sizeMaxEvery).
func (n *Node) refreshSizes(ctx context.Context, now time.Time, owned *slots.Set) error {
	t := &n.load
	t.sizeMu.Lock()
	defer t.sizeMu.Unlock()
	if !t.sizedAt.IsZero() && now.Sub(t.sizedAt) < t.sizeWait {
		return n.sizeGained(ctx, owned)
	}
	start := time.Now() // the pass's real cost, whatever the injected clock says
	var keys, bytes [slots.Count]int64
	if err := n.slotSizes(ctx, owned, &keys, &bytes); err != nil {
		return err
	}
	t.keys, t.bytes, t.sizedAt = keys, bytes, now
	t.sizeWait = min(max(sizeCost*time.Since(start), sizeMinEvery), sizeMaxEvery)
	return nil
}

// sizeGained sizes, one by one, the owned slots gained since the last size
// pass that were not sized since: between paced passes, a slot that just
// arrived is listed with its size (the cost is that of reading what its
// move just copied). Call with sizeMu held.
func (n *Node) sizeGained(ctx context.Context, owned *slots.Set) error {
	t := &n.load
	var todo []slots.Slot
	t.mu.Lock()
	for s := range owned.All() {
		if g := t.gained[s.Int()]; !g.IsZero() && t.sizedAt.Before(g) && !t.sized[s.Int()] {
			todo = append(todo, s)
		}
	}
	t.mu.Unlock()
	for _, s := range todo {
		keys, bytes, err := n.store.SlotSize(ctx, s)
		if err != nil {
			return err
		}
		t.keys[s.Int()], t.bytes[s.Int()], t.sized[s.Int()] = keys, bytes, true
	}
	return nil
}
