package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotd/slotd/slots"
)

// Config configures a Node. Zero values take the documented defaults.
type Config struct {
	// ID is the node's stable name in the directory (required).
	ID string
	// Store holds the data (required).
	Store Store
	// Map says who owns each slot (required); normally the SDK's map cache.
	Map MapSource
	// StateDir holds the library's own durable state: the fenced slots and
	// the change logs of slots being exported (required; created if
	// missing). Keep it on the same disk as the store's data.
	StateDir string
	// NoSync skips the fsync of change-log appends, trading durability of
	// the capture for write latency. Fences are always synced.
	NoSync bool
	// ExportBytesPerSecond is the initial export throttle; 0 is unlimited.
	// The mover changes it at run time.
	ExportBytesPerSecond int64
	// DropBytesPerSecond throttles the background deletion of handed-off
	// slots when the mover gives no rate (default 8 MiB/s).
	DropBytesPerSecond int64
	// FenceRetryAfter is the longest retry delay suggested to writers of a
	// fenced slot (default 50ms). The delay suggested is the fence's age, at
	// least 1ms: a fence lasts until the move's commit, milliseconds, so a
	// fixed 50ms made every write that met one wait far longer than it.
	FenceRetryAfter time.Duration
	// StatsWindow is the period over which writes per second are averaged
	// (default 1m).
	StatsWindow time.Duration
	// LoadInterval is how often the per-slot request counters are folded
	// into the decaying averages Load reports (default 5s).
	LoadInterval time.Duration
	// Clock drives the export throttle and reconciliation (default: the
	// real clock).
	Clock Clock
	// ReconcileInterval is how often reconciliation compares what the node
	// holds with its map (default DefaultReconcileInterval; negative: never,
	// ReconcileOnce only). It runs only over a WholeMap source.
	ReconcileInterval time.Duration
	// ReconcileGrace is how long something must stay unexplained before
	// reconciliation cleans it up (default DefaultReconcileGrace).
	ReconcileGrace time.Duration
	// FreshMap, when set, is read before each clean-up to confirm it (see
	// ReconcileOnce); without it the node's own map decides.
	FreshMap FreshMapFunc
	// Lease, when set, is the node's lease from slotd (the Registrar renews
	// it): the node serves the slots it owns only while the lease holds,
	// and answers ErrSelfFenced otherwise. Nil serves without one (a single
	// node, tests); a node that slotd can declare failed needs it.
	Lease *Lease
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Registerer receives the node's metrics (default: none registered).
	Registerer prometheus.Registerer
}

// Validate reports the first missing or bad field.
func (c *Config) Validate() error {
	switch {
	case c.ID == "":
		return errors.New("node: Config.ID is required")
	case c.Store == nil:
		return errors.New("node: Config.Store is required")
	case c.Map == nil:
		return errors.New("node: Config.Map is required")
	case c.StateDir == "":
		return errors.New("node: Config.StateDir is required")
	case c.ExportBytesPerSecond < 0:
		return errors.New("node: Config.ExportBytesPerSecond must not be negative")
	case c.DropBytesPerSecond < 0:
		return errors.New("node: Config.DropBytesPerSecond must not be negative")
	case c.FenceRetryAfter < 0:
		return errors.New("node: Config.FenceRetryAfter must not be negative")
	case c.StatsWindow < 0:
		return errors.New("node: Config.StatsWindow must not be negative")
	case c.ReconcileGrace < 0:
		return errors.New("node: Config.ReconcileGrace must not be negative")
	case c.LoadInterval < 0:
		return errors.New("node: Config.LoadInterval must not be negative")
	}
	return nil
}

func (c *Config) withDefaults() Config {
	d := *c
	if d.DropBytesPerSecond == 0 {
		d.DropBytesPerSecond = 8 << 20
	}
	if d.FenceRetryAfter == 0 {
		d.FenceRetryAfter = 50 * time.Millisecond
	}
	if d.StatsWindow == 0 {
		d.StatsWindow = time.Minute
	}
	if d.LoadInterval == 0 {
		d.LoadInterval = 5 * time.Second
	}
	if d.Clock == nil {
		d.Clock = realClock{}
	}
	if d.ReconcileInterval == 0 {
		d.ReconcileInterval = DefaultReconcileInterval
	}
	if d.ReconcileGrace == 0 {
		d.ReconcileGrace = DefaultReconcileGrace
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return d
}

// Node is the library a store embeds. It checks ownership and fences on every
// request, captures writes to slots being exported, and implements the
// migration protocol the mover drives. It is safe for concurrent use.
type Node struct {
	cfg      Config
	store    Store
	lg       *slog.Logger
	m        *metrics
	throttle *Throttle

	// slotMu serialises writes, fences and imports per slot, so that a
	// slot's change log has the order the store applied them in and a fence
	// waits for writes in flight.
	slotMu [slots.Count]sync.Mutex
	fenced [slots.Count]atomic.Bool   // written under slotMu and fenceMu
	writes [slots.Count]atomic.Uint64 // mutations applied
	reads  [slots.Count]atomic.Uint64 // reads served (CheckRead said yes)
	load   loadTracker                // folds reads and writes (load.go)

	fenceMu sync.Mutex // guards fences and their records
	fences  map[slots.Slot]FenceInfo

	// state persists fences, drops and import progress (see statelog.go).
	state *stateLog

	capMu    sync.Mutex // guards captures
	captures map[slots.Slot]*capture

	impMu   sync.Mutex // guards imports and importWake; each state also under its slotMu
	imports map[slots.Slot]*ImportState
	// seeds holds, per slot being imported, its source's rates at the
	// fence (seedRates), taken when the slot is gained (checkGained).
	seeds map[slots.Slot]seed
	// importWake holds, per slot, a channel closed at the slot's next
	// import state change: a batch sent ahead of its predecessor waits on
	// it (ImportSnapshot, SnapshotBatch.AfterPrevious).
	importWake map[slots.Slot]chan struct{}

	dropMu   sync.Mutex           // guards dropping
	dropping map[slots.Slot]int64 // slot -> delete rate in bytes/s
	// dropFlag mirrors dropping's keys (written under dropMu) for the
	// request path, which must not take a lock.
	dropFlag [slots.Count]atomic.Bool
	dropWake chan struct{}

	rateMu    sync.Mutex // guards the write-rate sample below
	lastCount [slots.Count]uint64
	lastRate  [slots.Count]float32

	// recMu serialises reconciliation passes and guards findings.
	recMu       sync.Mutex
	findings    map[findingKey]*finding
	orphanBytes atomic.Int64
	// minMap is the oldest map version the node acts on (RequireMapVersion).
	minMap atomic.Uint64

	// takeMu guards takeOwned: the slots this node owned in the map of
	// version takeVer, the last one checkGained looked at (takeover.go).
	takeMu    sync.Mutex
	takeOwned *slots.Set
	takeVer   atomic.Uint64

	closed atomic.Bool
}

// New opens a node: it loads the persisted fences and change logs from
// Config.StateDir. Call Run to start its background work and Close at the end.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("node: create state dir: %w", err)
	}
	caps, err := loadCaptures(cfg.StateDir, !cfg.NoSync)
	if err != nil {
		return nil, err
	}
	st, err := loadState(cfg.StateDir)
	if err != nil {
		for _, c := range caps {
			c.close()
		}
		return nil, err
	}
	fences, imports, drops := st.fences, st.imports, st.drops
	n := &Node{
		cfg:        cfg,
		store:      cfg.Store,
		lg:         cfg.Logger.With("node", cfg.ID),
		m:          newMetrics(cfg.Registerer, cfg.Lease),
		throttle:   NewThrottle(cfg.ExportBytesPerSecond, cfg.Clock),
		fences:     fences,
		captures:   caps,
		imports:    imports,
		importWake: map[slots.Slot]chan struct{}{},
		dropping:   drops,
		state:      st.log,
		dropWake:   make(chan struct{}, 1),
		findings:   map[findingKey]*finding{},
	}
	for s := range fences {
		n.fenced[s.Int()].Store(true)
		if c := caps[s]; c != nil {
			c.setFence(true)
		}
	}
	n.m.fenced.Set(float64(len(fences)))
	for s := range drops {
		n.dropFlag[s.Int()].Store(true)
	}
	n.m.throttle.Set(float64(cfg.ExportBytesPerSecond))
	if len(fences) > 0 || len(caps) > 0 || len(imports) > 0 || len(drops) > 0 {
		n.lg.Info("node state loaded", "fenced", len(fences), "captures", len(caps), "imports", len(imports), "drops", len(drops))
	}
	return n, nil
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// Close releases the change-log files; their contents stay for the next start.
// Call it after Run has returned.
func (n *Node) Close() error {
	if !n.closed.CompareAndSwap(false, true) {
		return nil
	}
	n.capMu.Lock()
	defer n.capMu.Unlock()
	var errs []error
	for _, c := range n.captures {
		errs = append(errs, c.close())
	}
	errs = append(errs, n.state.close())
	return errors.Join(errs...)
}

// Run does the node's background work — dropping handed-off slots, sampling
// write rates, folding the load counters — until ctx is done.
func (n *Node) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); n.runDrops(ctx) }()
	go func() { defer wg.Done(); n.runTakeover(ctx) }()
	go func() { defer wg.Done(); n.runReconcile(ctx) }()
	go func() { defer wg.Done(); n.runLoad(ctx) }()
	t := time.NewTicker(n.cfg.StatsWindow)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case now := <-t.C:
			n.sampleRates(now.Sub(last))
			last = now
		}
	}
}

func (n *Node) sampleRates(d time.Duration) {
	n.rateMu.Lock()
	defer n.rateMu.Unlock()
	secs := d.Seconds()
	for i := range n.writes {
		c := n.writes[i].Load()
		n.lastRate[i] = float32(float64(c-n.lastCount[i]) / secs)
		n.lastCount[i] = c
	}
}

// owner checks that this node owns slot s and returns the map's answer.
func (n *Node) owner(s slots.Slot) (Owner, error) {
	o, ok := n.cfg.Map.Owner(s)
	if !ok || o.Version < n.minMap.Load() {
		return o, ErrNoMap
	}
	if o.ID != n.cfg.ID {
		n.m.redirects.WithLabelValues("moved").Inc()
		return o, &RedirectError{Kind: Moved, Slot: s, Owner: o.ID, Addr: o.Addr, Version: o.Version}
	}
	n.checkGained(o.Version)
	if n.dropFlag[s.Int()].Load() {
		// Owned, and an old copy of it still being deleted: the slot came
		// to this node without an import (its data was declared lost with
		// a failed node). It serves nothing until the old copy is gone,
		// then starts empty.
		return o, fmt.Errorf("%w: slot %d", ErrDropping, s.Int())
	}
	return o, nil
}

// CheckRead returns nil when this node may serve a read of key: it owns the
// key's slot and holds its lease. A fenced slot still serves reads: its
// data is final until the new owner takes over. Otherwise it returns a
// *RedirectError, ErrNoMap or a *SelfFencedError.
//
// A nil answer counts the read in the slot's load (a read refused is not
// load on this node).
func (n *Node) CheckRead(key []byte) error {
	s := slots.ForKey(key)
	if _, err := n.owner(s); err != nil {
		return err
	}
	if err := n.leaseHolds(); err != nil {
		return err
	}
	n.countRead(s, key)
	return nil
}

// Write runs one write to key's slot through the library. It checks that this
// node owns the slot and that the slot is not fenced, then, holding the
// slot's write lock, calls prepare to compute the mutations (prepare may read
// the store, e.g. to compare versions: no other write to the slot runs
// meanwhile), applies them with Store.Apply and records them in the slot's
// change log if the slot is being exported.
//
// It returns a *RedirectError (errors.Is ErrMoved), ErrNoMap or ErrFenced
// without calling prepare, prepare's own error unchanged, ErrWrongSlot when a
// mutation's key is in another slot, or the store's error.
func (n *Node) Write(ctx context.Context, key []byte, prepare func() ([]Mutation, error)) error {
	s := slots.ForKey(key)
	if _, err := n.owner(s); err != nil {
		n.m.writes.WithLabelValues(resultOf(err)).Inc()
		return err
	}
	err := n.write(ctx, s, prepare)
	n.m.writes.WithLabelValues(resultOf(err)).Inc()
	return err
}

func (n *Node) write(ctx context.Context, s slots.Slot, prepare func() ([]Mutation, error)) error {
	mu := &n.slotMu[s.Int()]
	mu.Lock()
	defer mu.Unlock()
	if n.fenced[s.Int()].Load() {
		return n.fencedError(s)
	}
	// Checked under the slot's lock: a write may have waited for it.
	if err := n.leaseHolds(); err != nil {
		return err
	}
	batch, err := prepare()
	if err != nil {
		return err
	}
	if len(batch) == 0 {
		return nil
	}
	for _, m := range batch {
		if slots.ForKey(m.Key) != s {
			return fmt.Errorf("%w: key %q is in slot %d, write was for slot %d", ErrWrongSlot, m.Key, slots.ForKey(m.Key).Int(), s.Int())
		}
	}
	if err := n.store.Apply(ctx, s, batch); err != nil {
		return err
	}
	n.countWrites(s, batch[0].Key, len(batch))
	if c := n.captureOf(s); c != nil {
		// The store has the write but the log does not: fail the write so
		// it is not acknowledged, and say loudly that the copy is now
		// incomplete for an unacknowledged write.
		if err := c.append(batch); err != nil {
			n.lg.Error("change capture failed; the write is applied but not acknowledged", "slot", s.Int(), "err", err)
			return err
		}
	}
	// A lease that ran out while the write was applied (a slow disk, a
	// pause) acknowledges nothing: slotd may be giving the slot away.
	if err := n.leaseHolds(); err != nil {
		var sf *SelfFencedError
		if errors.As(err, &sf) {
			sf.Applied = true
		}
		return err
	}
	return nil
}

// leaseHolds is nil while the node's lease holds (or it has none to keep).
func (n *Node) leaseHolds() error {
	if n.cfg.Lease == nil {
		return nil
	}
	return n.cfg.Lease.Check()
}

func resultOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrMoved), errors.Is(err, ErrAsk):
		return "redirect"
	case errors.Is(err, ErrFenced), errors.Is(err, ErrNoMap), errors.Is(err, ErrSelfFenced):
		return "unavailable"
	}
	return "error"
}
