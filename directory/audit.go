package directory

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The audit log. Every operator action (and every node or cluster event,
// such as a node marked down) is one entry under audit/<kind>/<seq>, written
// in the same etcd transaction as the action itself, so the log never says
// something happened that did not, nor misses something that did. Each kind
// has its own bound (Config.AuditLimit), apart from the versioned history:
// a rebalance of 4,096 moves fills the history with per-move entries and
// pushes out no node or cluster event.
//
// How an action gets its entry:
//
//   - A versioned change of a node or cluster kind (bootstrap, node-*,
//     reindex-nodes, and any later kind not starting with "move-") is
//     audited by the directory itself, from its history entry.
//   - An unversioned write (plan records, the throttle, a policy) is
//     audited when its caller attaches an entry with WithAudit; the write
//     adds auditOps to its own transaction.
//   - WithAudit also refines the entry of a versioned change (who, why),
//     for changes whose Directory method takes no operator or reason.
//
// An entry attached to a context is written once: by the first write made
// with that context that succeeds and takes its kind (node and cluster
// entries by versioned changes and the throttle, plan entries by plan
// record writes). A call that makes several writes (Apply drains nodes,
// then marks the plan applying) records the action with the write that is
// the action, and each node change with its own node entry.

// AuditKind groups audit entries; each kind has its own key range and bound.
type AuditKind string

// Audit kinds. Per-move entries are not audited: they are the versioned
// history (History).
const (
	AuditCluster AuditKind = "cluster"
	AuditNode    AuditKind = "node"
	AuditPlan    AuditKind = "plan"
)

// AuditKinds lists every audit kind.
var AuditKinds = []AuditKind{AuditCluster, AuditNode, AuditPlan}

// Audit actions written by callers (versioned changes use their Change
// kind as the action: ChangeBootstrap, ChangeNodeDrain, ...).
const (
	ActionApply    = "apply"
	ActionPause    = "pause"
	ActionResume   = "resume"
	ActionCancel   = "cancel"
	ActionRollback = "rollback"
	ActionMove     = "move"
	ActionThrottle = "throttle"
	ActionNodeAdd  = "node-add"
	// ActionAutoPolicy: the automatic balancer's policy changed (on, off,
	// freeze, a setting).
	ActionAutoPolicy = "auto-policy"
)

// DefaultAuditLimit is how many entries of each kind are kept.
const DefaultAuditLimit = 10000

// AuditEntry is one entry of the audit log.
type AuditEntry struct {
	// Seq orders entries (newest last); set by the directory when written.
	Seq    string    `json:"-"`
	Kind   AuditKind `json:"kind"`
	Action string    `json:"action"`
	// Version is the directory version of a versioned change, else 0.
	Version uint64 `json:"version,omitempty"`
	Node    string `json:"node,omitempty"`
	PlanID  string `json:"plan,omitempty"`
	// By is the authenticated identity of the caller, or a component.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Detail says what changed in a few words.
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// auditKindOf returns the audit kind of a versioned change, or "" for a
// per-move change or a replica step, which the history alone records.
func auditKindOf(changeKind string) AuditKind {
	switch {
	case strings.HasPrefix(changeKind, "move-"), isReplicaStep(changeKind):
		return ""
	case strings.HasPrefix(changeKind, "node-"):
		return AuditNode
	}
	return AuditCluster
}

// pendingAudit is an entry attached to a context, written at most once.
type pendingAudit struct {
	e    AuditEntry
	done atomic.Bool
}

type auditCtxKey struct{}

// WithAudit returns ctx carrying e: the first write made with the returned
// context that takes e's kind records e in its own transaction (see the
// comment at the top of audit.go). Empty fields of e are filled from the
// change where there is one (version, node, detail).
func WithAudit(ctx context.Context, e AuditEntry) context.Context {
	return context.WithValue(ctx, auditCtxKey{}, &pendingAudit{e: e})
}

// pendingFrom returns the unwritten entry attached to ctx when its kind is
// one of kinds.
func pendingFrom(ctx context.Context, kinds ...AuditKind) *pendingAudit {
	p, _ := ctx.Value(auditCtxKey{}).(*pendingAudit)
	if p == nil || p.done.Load() || !slices.Contains(kinds, p.e.Kind) {
		return nil
	}
	return p
}

// auditSeq makes audit keys unique and ordered within a process (and across
// processes as far as their clocks agree): wall time, then a counter.
var auditSeq atomic.Uint64

func newAuditSeq() string {
	return fmt.Sprintf("%020d-%010d", time.Now().UnixNano(), auditSeq.Add(1)%1e10)
}

// auditPut returns the op that writes e (with a new Seq and, when unset,
// At) under its kind.
func (d *Directory) auditPut(e AuditEntry) (clientv3.Op, error) {
	if e.At.IsZero() {
		e.At = d.cfg.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return clientv3.Op{}, fmt.Errorf("directory: encode audit entry: %w", err)
	}
	return clientv3.OpPut(d.k.audit(string(e.Kind), newAuditSeq()), string(b)), nil
}

// auditOps returns the ops that record the entry attached to ctx, if it has
// one of kinds (none otherwise), for a write to add to its own transaction;
// fill completes the entry first (nil: as attached). The write calls
// written(true) once its transaction applied (the entry is then spent), or
// written(false) when it did not.
func (d *Directory) auditOps(ctx context.Context, fill func(*AuditEntry), kinds ...AuditKind) ([]clientv3.Op, func(applied bool), error) {
	p := pendingFrom(ctx, kinds...)
	if p == nil {
		return nil, func(bool) {}, nil
	}
	e := p.e
	if fill != nil {
		fill(&e)
	}
	op, err := d.auditPut(e)
	if err != nil {
		return nil, nil, err
	}
	return []clientv3.Op{op}, func(applied bool) {
		if applied {
			p.done.Store(true)
			d.audited(e.Kind, 1)
		}
	}, nil
}

// changeAudit returns the audit entry of a versioned change: from the
// change, refined by the entry attached to the change's caller (p, may be
// nil).
func changeAudit(c *Change, p *pendingAudit) AuditEntry {
	e := AuditEntry{
		Kind: auditKindOf(c.Kind), Action: c.Kind, Version: c.Version, Node: c.Node, PlanID: c.PlanID,
		By: c.By, Reason: c.Reason, At: c.At,
	}
	if p == nil || p.e.Kind != e.Kind {
		return e
	}
	a := p.e
	e.By = cmp.Or(a.By, e.By)
	e.Detail = a.Detail
	if a.Reason != "" && a.Reason != e.Reason {
		// The operator's why; the change's own text says what.
		e.Detail = cmp.Or(e.Detail, e.Reason)
		e.Reason = a.Reason
	}
	e.PlanID = cmp.Or(e.PlanID, a.PlanID)
	// The caller's name for what it did (node-add for a register).
	e.Action = cmp.Or(a.Action, e.Action)
	return e
}

// AuditQuery selects audit entries.
type AuditQuery struct {
	// Kind is the only kind to read; empty reads every kind.
	Kind AuditKind
	// Limit bounds the entries returned (the newest); <= 0 returns all
	// that are kept.
	Limit int
}

// Audit returns the newest audit entries that q selects, newest first.
func (d *Directory) Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error) {
	kinds := AuditKinds
	if q.Kind != "" {
		if !slices.Contains(AuditKinds, q.Kind) {
			return nil, fmt.Errorf("read audit log: %w: unknown kind %q (want cluster, node or plan)", ErrInvalid, q.Kind)
		}
		kinds = []AuditKind{q.Kind}
	}
	var out []AuditEntry
	for _, k := range kinds {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)}
		if q.Limit > 0 {
			opts = append(opts, clientv3.WithLimit(int64(q.Limit)))
		}
		rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
		resp, err := d.cli.Get(rctx, d.k.auditPrefix(string(k)), opts...)
		cancel()
		if err != nil {
			return nil, fromEtcd(ctx, "read audit log", err)
		}
		for _, kv := range resp.Kvs {
			var e AuditEntry
			if err := json.Unmarshal(kv.Value, &e); err != nil {
				return nil, fmt.Errorf("directory: audit entry %s: %w", kv.Key, err)
			}
			e.Seq = string(kv.Key[len(d.k.auditPrefix(string(k))):])
			out = append(out, e)
		}
	}
	// Newest first across kinds: by time, then by sequence.
	slices.SortStableFunc(out, func(a, b AuditEntry) int {
		return cmp.Or(b.At.Compare(a.At), strings.Compare(b.Seq, a.Seq))
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// audited counts entries written of kind and trims that kind to its bound
// every auditTrimEvery entries (a count per write would double the cost of
// an audited write). Between trims a kind holds at most AuditLimit +
// auditTrimEvery entries per writing process.
func (d *Directory) audited(k AuditKind, n int) {
	c := d.auditCount(k)
	if c == nil {
		return
	}
	every := uint64(d.auditTrimEvery())
	before := c.Add(uint64(n)) - uint64(n)
	if before/every == (before+uint64(n))/every {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.RequestTimeout)
	defer cancel()
	if err := d.trimAudit(ctx, k); err != nil {
		d.lg.Warn("audit log not trimmed", "kind", k, "err", err)
	}
}

// auditTrimEvery is how many entries of a kind are written between trims:
// an eighth of the bound, at most 64 and at least 1 (so a small bound, as
// tests set, is kept exactly).
func (d *Directory) auditTrimEvery() int { return min(max(d.cfg.AuditLimit/8, 1), 64) }

func (d *Directory) auditCount(k AuditKind) *atomic.Uint64 {
	switch k {
	case AuditCluster:
		return &d.auditN[0]
	case AuditNode:
		return &d.auditN[1]
	case AuditPlan:
		return &d.auditN[2]
	}
	return nil
}

// trimAudit deletes the oldest entries of kind k beyond AuditLimit.
func (d *Directory) trimAudit(ctx context.Context, k AuditKind) error {
	pre := d.k.auditPrefix(string(k))
	resp, err := d.cli.Get(ctx, pre, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fromEtcd(ctx, "count audit entries", err)
	}
	over := resp.Count - int64(d.cfg.AuditLimit)
	if over <= 0 {
		return nil
	}
	// The over-th oldest key: delete from the start of the range to it.
	old, err := d.cli.Get(ctx, pre, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(over))
	if err != nil {
		return fromEtcd(ctx, "read old audit entries", err)
	}
	if len(old.Kvs) == 0 {
		return nil
	}
	last := string(old.Kvs[len(old.Kvs)-1].Key)
	_, err = d.cli.Delete(ctx, pre, clientv3.WithRange(last+"\x00"))
	return fromEtcd(ctx, "trim audit log", err)
}
