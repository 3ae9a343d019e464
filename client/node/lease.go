package node

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// ErrSelfFenced is returned for every read and write of a slot this node
// owns while it holds no lease from slotd: it could not renew the lease in
// time, so slotd may already have given its slots to other nodes. It is
// retryable (UNAVAILABLE): the lease comes back with the next renewal that
// succeeds, or the client's map sends it to the slot's new owner.
var ErrSelfFenced = errors.New("node: cut off from slotd (lease expired); retry shortly")

// SelfFencedError is ErrSelfFenced with the times a client or an operator
// needs: since when the node has not renewed its lease, and when it stopped
// serving.
type SelfFencedError struct {
	Node string
	// LastRenewal is when the node sent the last renewal that succeeded;
	// zero when it never held a lease (not registered yet).
	LastRenewal time.Time
	// Since is when the lease ran out (LastRenewal + TTL - margin).
	Since time.Time
	// Applied says the write was applied on this node before the lease
	// ran out and is not acknowledged: its outcome is unknown to the
	// client, as after a timeout.
	Applied bool
}

func (e *SelfFencedError) Error() string {
	var what string
	switch {
	case e.LastRenewal.IsZero():
		what = fmt.Sprintf("node %s holds no lease from slotd yet (not registered)", e.Node)
	default:
		what = fmt.Sprintf("node %s is cut off from slotd since %s: no lease renewal since %s; it serves none of its slots",
			e.Node, e.Since.Format(time.RFC3339Nano), e.LastRenewal.Format(time.RFC3339Nano))
	}
	if e.Applied {
		what += "; this write was applied here but is not acknowledged (outcome unknown)"
	}
	return what + "; retry shortly, or on the slot's new owner"
}

// Is makes errors.Is(err, ErrSelfFenced) work.
func (e *SelfFencedError) Is(target error) bool { return target == ErrSelfFenced }

// Lease is a store's lease from slotd as the store sees it: the Registrar
// renews it, and a Node given it (Config.Lease) serves its slots only
// while it holds. Counted on the store's own clock (a monotonic one: the
// real clock's readings carry Go's monotonic time) from the moment the
// store SENT the renewal that succeeded, the lease holds for TTL - margin.
// slotd's side of the rule (it lets the node's slots go only TTL + margin
// after the last renewal it granted) is in docs/leases.md.
//
// A Lease starts not held: a node that has not registered serves nothing.
type Lease struct {
	id    string
	clock Clock
	lg    *slog.Logger
	st    atomic.Pointer[leaseState]
	// fenced is 1 while the lease is known not to hold (logged once per
	// lapse); read by the slotd_node_self_fenced gauge.
	fenced atomic.Bool
}

// leaseState is one renewal's outcome; replaced whole, never changed.
type leaseState struct {
	lease    int64     // slotd's lease id
	sent     time.Time // when the renewal was sent (zero: never held)
	deadline time.Time // sent + TTL - margin
}

// NewLease returns the lease of node id, not held yet, on clock (nil: the
// real clock) and logging to lg (nil: slog.Default()).
func NewLease(id string, clock Clock, lg *slog.Logger) *Lease {
	if clock == nil {
		clock = realClock{}
	}
	if lg == nil {
		lg = slog.Default()
	}
	l := &Lease{id: id, clock: clock, lg: lg.With("node", id)}
	l.st.Store(&leaseState{})
	l.fenced.Store(true)
	return l
}

// Renewed records a renewal of lease that succeeded: one sent at sent (the
// store's clock, read before the request went out), granting ttl with the
// given margin. A renewal older than the one held changes nothing.
func (l *Lease) Renewed(lease int64, sent time.Time, ttl, margin time.Duration) {
	next := &leaseState{lease: lease, sent: sent, deadline: sent.Add(ttl - margin)}
	for {
		cur := l.st.Load()
		if !cur.sent.IsZero() && cur.lease == lease && !sent.After(cur.sent) {
			return
		}
		if l.st.CompareAndSwap(cur, next) {
			break
		}
	}
	if l.clock.Now().Before(next.deadline) && l.fenced.CompareAndSwap(true, false) {
		l.lg.Info("lease holds: serving", "lease", fmt.Sprintf("%x", lease), "until", next.deadline.Format(time.RFC3339Nano))
	}
}

// Lost drops the lease at once: slotd said it is not current (it ran out,
// or the node was removed or declared failed). The node serves nothing
// until a registration grants a new one.
func (l *Lease) Lost() {
	cur := l.st.Load()
	now := l.clock.Now()
	if cur.deadline.After(now) {
		l.st.CompareAndSwap(cur, &leaseState{lease: cur.lease, sent: cur.sent, deadline: now})
	}
	l.check(now)
}

// Check returns nil while the lease holds, else a *SelfFencedError.
func (l *Lease) Check() error { return l.check(l.clock.Now()) }

func (l *Lease) check(now time.Time) error {
	st := l.st.Load()
	if now.Before(st.deadline) {
		return nil
	}
	err := &SelfFencedError{Node: l.id, LastRenewal: st.sent, Since: st.deadline}
	if l.fenced.CompareAndSwap(false, true) {
		l.lg.Warn("lease ran out: self-fenced, serving nothing until a renewal succeeds",
			"last_renewal", st.sent.Format(time.RFC3339Nano), "since", st.deadline.Format(time.RFC3339Nano))
	}
	return err
}

// SelfFenced reports whether the lease does not hold now.
func (l *Lease) SelfFenced() bool { return l.Check() != nil }
