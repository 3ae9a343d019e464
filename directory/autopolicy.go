package directory

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The automatic balancer's policy and state live in the directory,
// outside the versioned table (changing them moves no slot, so they bump
// no version): the policy so that every slotd replica and slotctl see one
// policy, the state so that a new mover leader keeps the balancer's
// backoff and its hourly budget. Both are JSON records written by
// compare-and-swap on their mod revision.

// Defaults of the automatic balancer's policy (an absent record reads as
// these).
const (
	DefaultAutoTolerance   = 0.10
	DefaultAutoWindow      = 10 * time.Minute
	DefaultAutoInterval    = 5 * time.Minute
	DefaultAutoBudgetMoves = 1024
	DefaultAutoBudgetBytes = 64 << 30
	DefaultAutoBalanceBy   = "auto"
)

// AutoBalanceModes are the values AutoPolicy.BalanceBy takes: the
// planner's modes (slots: slot counts; bytes, ops: measured load; auto:
// both measured dimensions, slot counts while no load is known).
var AutoBalanceModes = []string{"auto", "slots", "bytes", "ops"}

// AutoPolicy is the automatic balancer's policy.
type AutoPolicy struct {
	// Enabled turns the balancer on; it is off unless an operator turns it
	// on.
	Enabled bool `json:"enabled"`
	// Frozen stops every new automatic plan while leaving Enabled as it
	// is (an incident switch: `slotctl auto freeze`).
	Frozen bool `json:"frozen"`
	// Tolerance is the dead band: a node whose load ratio is within
	// 1 ± Tolerance of its share is balanced.
	Tolerance float64 `json:"tolerance"`
	// Window is how long an imbalance beyond the band must last before the
	// balancer plans for it.
	Window time.Duration `json:"window_ns"`
	// Interval is the least time between two automatic plans, and after an
	// operator's plan, pause or cancel.
	Interval time.Duration `json:"interval_ns"`
	// BudgetMoves and BudgetBytes bound what automatic plans move in any
	// hour (0: no bound).
	BudgetMoves int   `json:"budget_moves_per_hour"`
	BudgetBytes int64 `json:"budget_bytes_per_hour"`
	// BalanceBy is the planner's mode, one of AutoBalanceModes.
	BalanceBy string `json:"balance_by"`

	// Who changed the policy last, when and why.
	UpdatedBy string    `json:"updated_by,omitempty"`
	Updated   time.Time `json:"updated,omitzero"`
	Reason    string    `json:"reason,omitempty"`
}

// DefaultAutoPolicy is the policy while none is stored: off.
func DefaultAutoPolicy() AutoPolicy {
	return AutoPolicy{
		Tolerance: DefaultAutoTolerance, Window: DefaultAutoWindow, Interval: DefaultAutoInterval,
		BudgetMoves: DefaultAutoBudgetMoves, BudgetBytes: DefaultAutoBudgetBytes, BalanceBy: DefaultAutoBalanceBy,
	}
}

// Validate reports (as ErrInvalid) a policy the balancer cannot follow.
func (p AutoPolicy) Validate() error {
	switch {
	case math.IsNaN(p.Tolerance) || p.Tolerance <= 0 || p.Tolerance >= 1:
		return fmt.Errorf("%w: auto policy: tolerance %v must be above 0 and below 1 (0.1 is 10%%)", ErrInvalid, p.Tolerance)
	case p.Window < 0:
		return fmt.Errorf("%w: auto policy: window %v is negative", ErrInvalid, p.Window)
	case p.Interval < 0:
		return fmt.Errorf("%w: auto policy: interval %v is negative", ErrInvalid, p.Interval)
	case p.BudgetMoves < 0:
		return fmt.Errorf("%w: auto policy: budget of %d moves is negative", ErrInvalid, p.BudgetMoves)
	case p.BudgetBytes < 0:
		return fmt.Errorf("%w: auto policy: budget of %d bytes is negative", ErrInvalid, p.BudgetBytes)
	case !slices.Contains(AutoBalanceModes, p.BalanceBy):
		return fmt.Errorf("%w: auto policy: balance-by %q is not one of %s", ErrInvalid, p.BalanceBy, strings.Join(AutoBalanceModes, ", "))
	case len(p.Reason) > maxReasonLen:
		return fmt.Errorf("%w: auto policy: reason is longer than %d bytes", ErrInvalid, maxReasonLen)
	}
	return nil
}

// maxReasonLen bounds the free text stored with a policy change.
const maxReasonLen = 1024

// AutoPolicy returns the stored policy, or DefaultAutoPolicy when none
// was stored.
func (d *Directory) AutoPolicy(ctx context.Context) (AutoPolicy, error) {
	p, _, err := d.autoPolicy(ctx)
	return p, err
}

func (d *Directory) autoPolicy(ctx context.Context) (AutoPolicy, int64, error) {
	p := DefaultAutoPolicy()
	rev, err := d.getJSON(ctx, "read auto policy", d.k.autoPolicy(), &p)
	return p, rev, err
}

// UpdateAutoPolicy applies edit to the stored policy (or the default one)
// and stores the result if it is valid, compare-and-swap on the record's
// revision, re-reading and retrying when another writer came first. by and
// reason are recorded in the policy. It returns the policy stored, or
// ErrInvalid (nothing stored) or the error edit returned.
func (d *Directory) UpdateAutoPolicy(ctx context.Context, by, reason string, edit func(*AutoPolicy) error) (AutoPolicy, error) {
	for range d.cfg.UpdateAttempts {
		p, rev, err := d.autoPolicy(ctx)
		if err != nil {
			return AutoPolicy{}, err
		}
		if err := edit(&p); err != nil {
			return AutoPolicy{}, err
		}
		p.UpdatedBy, p.Reason, p.Updated = by, reason, d.cfg.Now().UTC()
		if err := p.Validate(); err != nil {
			return AutoPolicy{}, err
		}
		// The change is audited in its own txn (audit.go).
		actx := ctx
		if pendingFrom(ctx, AuditCluster) == nil {
			actx = WithAudit(ctx, AuditEntry{Kind: AuditCluster, Action: ActionAutoPolicy, By: by, Reason: reason})
		}
		audit, written, err := d.auditOps(actx, func(e *AuditEntry) {
			e.Detail = cmp.Or(e.Detail, fmt.Sprintf("enabled %t frozen %t tolerance %g window %v interval %v balance-by %s",
				p.Enabled, p.Frozen, p.Tolerance, p.Window, p.Interval, p.BalanceBy))
		}, AuditCluster)
		if err != nil {
			return AutoPolicy{}, err
		}
		ok, err := d.putJSON(ctx, "write auto policy", d.k.autoPolicy(), rev, p, audit...)
		written(err == nil && ok)
		if err != nil {
			return AutoPolicy{}, err
		}
		if ok {
			d.lg.Info("auto policy changed", "by", by, "reason", reason, "enabled", p.Enabled, "frozen", p.Frozen,
				"tolerance", p.Tolerance, "window", p.Window, "interval", p.Interval, "balance_by", p.BalanceBy)
			return p, nil
		}
		d.m.conflict()
	}
	return AutoPolicy{}, fmt.Errorf("%w: auto policy: %d writers came first", ErrConflict, d.cfg.UpdateAttempts)
}

// AutoState is what the automatic balancer remembers across leaders.
type AutoState struct {
	// Failures counts automatic plans in a row that paused or failed; it
	// sets the backoff and goes back to 0 when one completes or an
	// operator acts.
	Failures int `json:"failures,omitempty"`
	// BackoffUntil is when the balancer may plan again after a failure.
	BackoffUntil time.Time `json:"backoff_until,omitzero"`
	// FailedPlan is the automatic plan whose failure set the backoff, at
	// FailedAt; CancelledPlan the last one the balancer cancelled itself
	// (after its backoff), so that its cancel is not taken for an
	// operator's.
	FailedPlan    string    `json:"failed_plan,omitempty"`
	FailedAt      time.Time `json:"failed_at,omitzero"`
	CancelledPlan string    `json:"cancelled_plan,omitempty"`
	// LastPlan is the id of the newest automatic plan, and LastPlanAt when
	// it was applied.
	LastPlan   string    `json:"last_plan,omitempty"`
	LastPlanAt time.Time `json:"last_plan_at,omitzero"`
	// Recent lists the automatic plans of the last hour, for the budget.
	Recent []AutoPlanSpend `json:"recent,omitempty"`
	// Decision is the balancer's latest decision, in words, and its kind;
	// DecidedAt when it was first made.
	Decision     string    `json:"decision,omitempty"`
	DecisionKind string    `json:"decision_kind,omitempty"`
	DecidedAt    time.Time `json:"decided_at,omitzero"`
	// Leader names the slotd whose balancer wrote this.
	Leader string `json:"leader,omitempty"`
}

// AutoPlanSpend is what one automatic plan moved (as planned).
type AutoPlanSpend struct {
	Plan  string    `json:"plan"`
	At    time.Time `json:"at"`
	Moves int       `json:"moves"`
	Bytes int64     `json:"bytes"`
}

// AutoState returns the balancer's stored state (zero when none) and the
// record's revision for PutAutoState.
func (d *Directory) AutoState(ctx context.Context) (AutoState, int64, error) {
	var s AutoState
	rev, err := d.getJSON(ctx, "read auto state", d.k.autoState(), &s)
	return s, rev, err
}

// PutAutoState stores s if the record is still at revision rev (0: no
// record); ErrConflict when another writer came first.
func (d *Directory) PutAutoState(ctx context.Context, rev int64, s AutoState) error {
	ok, err := d.putJSON(ctx, "write auto state", d.k.autoState(), rev, s)
	if err != nil {
		return err
	}
	if !ok {
		d.m.conflict()
		return fmt.Errorf("%w: auto state changed since revision %d", ErrConflict, rev)
	}
	return nil
}

// getJSON reads key into v and returns its mod revision (0 and v
// untouched when the key is absent).
func (d *Directory) getJSON(ctx context.Context, op, key string, v any) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, key)
	if err != nil {
		return 0, fromEtcd(ctx, op, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, v); err != nil {
		return 0, fmt.Errorf("directory: %s: %s holds no valid record: %w", op, key, err)
	}
	return resp.Kvs[0].ModRevision, nil
}

// putJSON writes v under key if its mod revision is still rev (0: the key
// must not exist); ok is false when it was not.
func (d *Directory) putJSON(ctx context.Context, op, key string, rev int64, v any, also ...clientv3.Op) (ok bool, err error) {
	b, err := json.Marshal(v)
	if err != nil {
		return false, fmt.Errorf("directory: %s: %w", op, err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(append([]clientv3.Op{clientv3.OpPut(key, string(b))}, also...)...).
		Commit()
	if err != nil {
		return false, fromEtcd(ctx, op, err)
	}
	return resp.Succeeded, nil
}
