package directory

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/slots"
)

// SchemaVersion is the newest schema (etcd layout) this code reads and
// writes. migrations registers the steps that reach it.
const SchemaVersion = 3

// Defaults for Config fields left zero.
const (
	DefaultHistoryLimit   = 10000
	DefaultRequestTimeout = 5 * time.Second
	DefaultDownAfter      = 10 * time.Second
	DefaultHoldDown       = 30 * time.Second
	// DefaultUpdateAttempts bounds how often an update re-reads and retries
	// after losing a compare-and-swap race.
	DefaultUpdateAttempts = 16
)

// Config configures a Directory. Zero fields take the defaults above.
type Config struct {
	// Client is the etcd client. Required; the Directory does not close it.
	Client *clientv3.Client
	// Prefix is the key prefix, ending in "/". Default DefaultPrefix.
	Prefix string
	// Logger receives the directory's events. Default: discard.
	Logger *slog.Logger
	// Registerer, when set, gets the directory's metrics.
	Registerer prometheus.Registerer
	// HistoryLimit is how many history entries are kept (the newest).
	HistoryLimit int
	// AuditLimit is how many audit entries of each kind are kept (the
	// newest; see audit.go). Default DefaultAuditLimit.
	AuditLimit int
	// RequestTimeout bounds each etcd request.
	RequestTimeout time.Duration
	// DownAfter is how long a node may go without heartbeats before the
	// liveness loop marks it down: the TTL of a store's lease (lease.go).
	DownAfter time.Duration
	// LeaseMargin is the safety margin of a store's lease: the store stops
	// serving at DownAfter - LeaseMargin after its last renewal, and the
	// etcd lease behind it lasts DownAfter + LeaseMargin (rounded up to
	// whole seconds). Default DownAfter / DefaultLeaseMargin; less than
	// DownAfter / 2.
	LeaseMargin time.Duration
	// HoldDown is how long a node that came back must keep heartbeating
	// before it counts as active again (damps flapping).
	HoldDown time.Duration
	// LivenessInterval is how often RunLiveness checks. Default DownAfter/4,
	// at least 50ms.
	LivenessInterval time.Duration
	// UpdateAttempts bounds the retries of an update on conflict.
	UpdateAttempts int
	// MaxSchema is the newest schema this process accepts. Default
	// SchemaVersion; tests of migrations raise it.
	MaxSchema int
	// Now is the clock for recorded times and hold-down. Default time.Now.
	Now func() time.Time
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HistoryLimit == 0 {
		c.HistoryLimit = DefaultHistoryLimit
	}
	if c.AuditLimit == 0 {
		c.AuditLimit = DefaultAuditLimit
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.DownAfter == 0 {
		c.DownAfter = DefaultDownAfter
	}
	if c.HoldDown == 0 {
		c.HoldDown = DefaultHoldDown
	}
	if c.LeaseMargin == 0 {
		c.LeaseMargin = c.DownAfter / DefaultLeaseMargin
	}
	if c.LivenessInterval == 0 {
		c.LivenessInterval = max(c.DownAfter/4, 50*time.Millisecond)
	}
	if c.UpdateAttempts == 0 {
		c.UpdateAttempts = DefaultUpdateAttempts
	}
	if c.MaxSchema == 0 {
		c.MaxSchema = SchemaVersion
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports whether c, after defaults, can make a Directory.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: config: Client is required", ErrInvalid)
	case ValidatePrefix(c.Prefix) != nil:
		return fmt.Errorf("config: Prefix: %w", ValidatePrefix(c.Prefix))
	case c.HistoryLimit < 1:
		return fmt.Errorf("%w: config: HistoryLimit %d must be at least 1", ErrInvalid, c.HistoryLimit)
	case c.AuditLimit < 1:
		return fmt.Errorf("%w: config: AuditLimit %d must be at least 1", ErrInvalid, c.AuditLimit)
	case c.RequestTimeout < 0 || c.DownAfter < 0 || c.HoldDown < 0 || c.LivenessInterval < 0 || c.LeaseMargin < 0:
		return fmt.Errorf("%w: config: durations must not be negative", ErrInvalid)
	case 2*c.LeaseMargin >= c.DownAfter:
		return fmt.Errorf("%w: config: LeaseMargin %v must be less than half of DownAfter %v", ErrInvalid, c.LeaseMargin, c.DownAfter)
	case c.UpdateAttempts < 1:
		return fmt.Errorf("%w: config: UpdateAttempts %d must be at least 1", ErrInvalid, c.UpdateAttempts)
	case c.MaxSchema < 1:
		return fmt.Errorf("%w: config: MaxSchema %d must be at least 1", ErrInvalid, c.MaxSchema)
	}
	return nil
}

// Directory is the versioned slot table in etcd. It is safe for concurrent
// use; it keeps no state of its own between calls, so any number of
// Directories (in any number of processes) may share one etcd.
type Directory struct {
	cfg Config
	cli *clientv3.Client
	k   keys
	lg  *slog.Logger
	m   *metrics

	// cache is the state as this process last wrote it. An update takes
	// it (so no two updates share it) instead of reading the table first:
	// when nobody else wrote since, that saves a round trip per change,
	// which is most of a move's control overhead. When somebody did, the
	// txn's compare fails and the update re-reads; a precondition that
	// fails on the cached state is re-checked on a fresh read before it is
	// reported. Snapshot, watches and History never use it.
	cache atomic.Pointer[state]
	// tableReads counts reads of the whole table (tests check that an
	// update on a warm cache makes none).
	tableReads atomic.Int64
	// group queues concurrent updates for one txn (see group.go).
	group combiner
	// auditN counts the audit entries this process wrote, per kind
	// (cluster, node, plan), to trim each kind now and then (audit.go).
	auditN [3]atomic.Uint64

	// afterWatchRead, when set (by tests only), runs in Watch between the
	// read of the table and the start of the etcd watch.
	afterWatchRead func()
	// historySweep is how often (in versions) a write trims the history
	// from its start, not only what it pushes out (historySweepEvery;
	// tests lower it).
	historySweep uint64
	// txnHook, when set (by tests only), runs each write's txn: it may run
	// it or not, now or later, and answer what it likes (an answer lost
	// after the write, a txn that applies after its writer gave up).
	txnHook func(ctx context.Context, txn func(context.Context) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error)
}

// New returns a Directory for cfg. It does not contact etcd.
func New(cfg Config) (*Directory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Directory{cfg: cfg, cli: cfg.Client, k: keys{cfg.Prefix}, lg: cfg.Logger, m: m, historySweep: historySweepEvery}, nil
}

// historySweepEvery is how many versions apart a write trims the whole
// history range, not only the entries it pushes out.
const historySweepEvery = 1024

// read returns the table at one etcd revision, read in one txn, and that
// revision.
func (d *Directory) read(ctx context.Context) (*state, int64, error) {
	d.tableReads.Add(1)
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Txn(rctx).Then(
		clientv3.OpGet(d.k.schema()),
		clientv3.OpGet(d.k.version()),
		clientv3.OpGet(d.k.ownersPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(d.k.replicasPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(d.k.replication()),
		clientv3.OpGet(d.k.nodesPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(d.k.movesPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(d.k.runPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, 0, fromEtcd(ctx, "read table", err)
	}
	st := newState()
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			if err := st.apply(d.k, kv); err != nil {
				return nil, 0, fmt.Errorf("directory: read table: %w", err)
			}
		}
	}
	d.m.setVersion(st.version)
	return st, resp.Header.Revision, nil
}

// checkSchema says whether this process may use a table at st's schema.
func (d *Directory) checkSchema(st *state) error {
	switch {
	case st.schema == 0:
		return fmt.Errorf("%w: etcd under %q has no schema version; run migrations.Apply (slotd does at start)", ErrNoSchema, d.cfg.Prefix)
	case st.schema > d.cfg.MaxSchema:
		return fmt.Errorf("%w: found schema %d, this binary supports up to %d; upgrade slotd", ErrSchemaTooNew, st.schema, d.cfg.MaxSchema)
	}
	return nil
}

// Snapshot returns the full table at one version. It fails with
// ErrNotBootstrapped before Bootstrap.
func (d *Directory) Snapshot(ctx context.Context) (*Snapshot, error) {
	st, _, err := d.read(ctx)
	if err != nil {
		return nil, err
	}
	if err := d.checkSchema(st); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if !st.bootstrapped() {
		return nil, fmt.Errorf("snapshot: %w; run bootstrap", ErrNotBootstrapped)
	}
	return st.snapshot(), nil
}

// Nodes returns the registered nodes (sorted by id) and the version they
// were read at. Unlike Snapshot it works before Bootstrap.
func (d *Directory) Nodes(ctx context.Context) ([]Node, uint64, error) {
	st, _, err := d.read(ctx)
	if err != nil {
		return nil, 0, err
	}
	if err := d.checkSchema(st); err != nil {
		return nil, 0, fmt.Errorf("list nodes: %w", err)
	}
	return st.snapshot().Nodes, st.version, nil
}

// Version returns the current cluster version (0 before any change).
func (d *Directory) Version(ctx context.Context) (uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, d.k.version())
	if err != nil {
		return 0, fromEtcd(ctx, "read version", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	v, err := strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("directory: version key holds %q, not a version", resp.Kvs[0].Value)
	}
	return v, nil
}

// mutation collects what one attempt of an update changes: the keys to
// rewrite from the (already changed) state, and the history entry.
type mutation struct {
	nodes   map[string]bool
	moves   map[uint16]bool
	chunks  map[int]bool
	change  Change
	hasSlot bool
	// runs are plans whose run key must still exist when the txn applies.
	runs map[string]bool
	// extra are writes outside the table in the same txn (move results).
	extra []clientv3.Op
	// cmps are conditions outside the table the txn also needs (a plan
	// record that must not exist yet); only an update written alone
	// (updateOpts.alone) sets them.
	cmps []clientv3.Cmp
	// replicaChunks are the replicas/NN keys to rewrite (or delete when
	// the chunk holds no set); policy says the replication key changed.
	replicaChunks map[int]bool
	policy        bool
}

func (m *mutation) node(id string)   { m.nodes[id] = true }
func (m *mutation) move(s uint16)    { m.moves[s] = true }
func (m *mutation) chunk(slot int)   { m.chunks[slot/chunkSlots] = true }
func (m *mutation) needRun(p string) { m.runs[p] = true }
func (m *mutation) empty() bool {
	return len(m.nodes)+len(m.moves)+len(m.chunks)+len(m.replicaChunks)+len(m.extra) == 0 && !m.policy
}
func (m *mutation) slot(s uint16) { m.hasSlot = true; m.change.Slot = slotOf(s) }

// merge adds what o touched to m (the history entry stays with o).
func (m *mutation) merge(o *mutation) {
	for id := range o.nodes {
		m.nodes[id] = true
	}
	for s := range o.moves {
		m.moves[s] = true
	}
	for c := range o.chunks {
		m.chunks[c] = true
	}
	for c := range o.replicaChunks {
		m.replicaChunks[c] = true
	}
	m.policy = m.policy || o.policy
	for p := range o.runs {
		m.runs[p] = true
	}
	m.extra = append(m.extra, o.extra...)
	m.cmps = append(m.cmps, o.cmps...)
}

func newMutation() *mutation {
	return &mutation{nodes: map[string]bool{}, moves: map[uint16]bool{}, chunks: map[int]bool{}, replicaChunks: map[int]bool{}, runs: map[string]bool{}}
}

// updateOpts says how an update treats a lost race.
type updateOpts struct {
	// expect, when non-zero, is the version the caller decided on: any
	// other version is a conflict, and there is no retry.
	expect uint64
	// needBootstrap fails the update with ErrNotBootstrapped before
	// Bootstrap.
	needBootstrap bool
	// alone writes the update in a transaction of its own, from the
	// cached table when there is one, and fails it with ErrConflict on
	// the first race lost on a fresh read: its fn adds compares outside
	// the table (mutation.cmps), which a retry would only fail again.
	alone bool
}

// commit writes m and the history entries of changes as one txn on top of
// st, whose version is the one before the first change. It reports false
// when another writer got there first, and the txn's revision when it
// applied.
func (d *Directory) commit(ctx context.Context, st *state, m *mutation, changes []pendingChange) (bool, int64, error) {
	v := st.version + uint64(len(changes))
	ops := []clientv3.Op{clientv3.OpPut(d.k.version(), strconv.FormatUint(v, 10))}
	for id := range m.nodes {
		if n, ok := st.nodes[id]; ok {
			b, err := json.Marshal(n)
			if err != nil {
				return false, 0, fmt.Errorf("directory: encode node %q: %w", id, err)
			}
			ops = append(ops, clientv3.OpPut(d.k.node(id), string(b)))
		} else {
			ops = append(ops, clientv3.OpDelete(d.k.node(id)))
		}
	}
	for s := range m.moves {
		if mv, ok := st.moves[s]; ok {
			b, err := json.Marshal(mv)
			if err != nil {
				return false, 0, fmt.Errorf("directory: encode move of slot %d: %w", s, err)
			}
			ops = append(ops, clientv3.OpPut(d.k.move(s), string(b)))
		} else {
			ops = append(ops, clientv3.OpDelete(d.k.move(s)))
		}
	}
	for c := range m.chunks {
		ops = append(ops, clientv3.OpPut(d.k.chunk(c), string(st.encodeChunk(c))))
	}
	for c := range m.replicaChunks {
		if b := encodeReplicas(st.replicas[c]); b != nil {
			ops = append(ops, clientv3.OpPut(d.k.replicas(c), string(b)))
		} else {
			ops = append(ops, clientv3.OpDelete(d.k.replicas(c)))
		}
	}
	if m.policy {
		b, err := json.Marshal(st.policy)
		if err != nil {
			return false, 0, fmt.Errorf("directory: encode replication policy: %w", err)
		}
		ops = append(ops, clientv3.OpPut(d.k.replication(), string(b)))
	}
	now := d.cfg.Now().UTC()
	for i := range changes {
		c := &changes[i]
		c.change.Version = st.version + uint64(i) + 1
		c.change.At = now
		b, err := json.Marshal(recFromChange(&c.change, c.hasSlot))
		if err != nil {
			return false, 0, fmt.Errorf("directory: encode history: %w", err)
		}
		ops = append(ops, clientv3.OpPut(d.k.history(c.change.Version), string(b)))
		if auditKindOf(c.change.Kind) != "" {
			op, err := d.auditPut(changeAudit(&c.change, c.audit))
			if err != nil {
				return false, 0, err
			}
			ops = append(ops, op)
		}
	}
	// One history entry per version: this write pushes out exactly the
	// entries at versions st.version-limit+1 .. v-limit, and deletes only
	// those. A range from history/0 would walk every key deleted since
	// etcd's last compaction, so each commit would cost more than the one
	// before (one move in 100,000 cost ten times the first). Once every
	// historySweep versions the range starts at 0 again, for entries a
	// larger HistoryLimit kept.
	if limit := uint64(d.cfg.HistoryLimit); v > limit {
		from := uint64(0)
		if st.version > limit && v/d.historySweep == st.version/d.historySweep {
			from = st.version - limit + 1
		}
		ops = append(ops, clientv3.OpDelete(d.k.history(from), clientv3.WithRange(d.k.history(v-limit+1))))
	}
	ops = append(ops, m.extra...)
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(d.k.version()), "=", st.versionRev),
		clientv3.Compare(clientv3.Value(d.k.schema()), "=", strconv.Itoa(st.schema)),
	}
	// A pause or cancel deletes the run key without touching the version:
	// the begin of a move of that plan must then fail, even in a group.
	// (Then the group re-reads, and that begin fails on its own.)
	for p := range m.runs {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(d.k.run(p)), ">", 0))
	}
	cmps = append(cmps, m.cmps...)
	// One attempt is short (writeGroup retries within RequestTimeout): a
	// request stuck on an etcd member that lost its leadership would
	// otherwise hold the write, and a fenced slot behind it, for the whole
	// RequestTimeout while the election takes about a second.
	tctx, cancel := context.WithTimeout(ctx, d.attemptTimeout())
	defer cancel()
	start := time.Now()
	txn := func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return d.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	}
	var resp *clientv3.TxnResponse
	var err error
	if d.txnHook != nil {
		resp, err = d.txnHook(tctx, txn)
	} else {
		resp, err = txn(tctx)
	}
	result := "error"
	if err == nil {
		result = map[bool]string{true: "applied", false: "conflict"}[resp.Succeeded]
	}
	d.m.observeTxn(time.Since(start), result)
	if err != nil {
		// The txn may or may not have applied; the caller must re-read.
		return false, 0, fromEtcd(ctx, "write", err)
	}
	return resp.Succeeded, resp.Header.Revision, nil
}

func slotOf(s uint16) slots.Slot { return slots.MustNew(int(s)) }
