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
	// base is the clock when the lease was made; deadlines are kept as
	// offsets from it. With the real clock, base carries Go's monotonic
	// reading and the request path reads only the monotonic clock
	// (time.Since: one vDSO call, half of time.Now's cost).
	base time.Time
	real bool
	st   atomic.Pointer[leaseState]
	// fenced is 1 while the lease is known not to hold (logged once per
	// lapse); read by the slotd_node_self_fenced gauge.
	fenced atomic.Bool
}

// leaseState is one renewal's outcome; replaced whole, never changed.
type leaseState struct {
	lease    int64     // slotd's lease id
	sent     time.Time // when the renewal was sent (zero: never held)
	deadline time.Time // sent + TTL - margin
	// until is deadline - base: the lease holds while elapsed() < until.
	until time.Duration
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
	_, real := clock.(realClock)
	l := &Lease{id: id, clock: clock, lg: lg.With("node", id), base: clock.Now(), real: real}
	l.st.Store(&leaseState{})
	l.fenced.Store(true)
	return l
}

// Renewed records a renewal of lease that succeeded: one sent at sent (the
// store's clock, read before the request went out), granting ttl with the
// given margin. A renewal older than the one held changes nothing.
func (l *Lease) Renewed(lease int64, sent time.Time, ttl, margin time.Duration) {
	deadline := sent.Add(ttl - margin)
	next := &leaseState{lease: lease, sent: sent, deadline: deadline, until: deadline.Sub(l.base)}
	for {
		cur := l.st.Load()
		if !cur.sent.IsZero() && cur.lease == lease && !sent.After(cur.sent) {
			return
		}
		if l.st.CompareAndSwap(cur, next) {
			break
		}
	}
	if l.elapsed() < next.until && l.fenced.CompareAndSwap(true, false) {
		l.lg.Info("lease holds: serving", "lease", fmt.Sprintf("%x", lease), "until", next.deadline.Format(time.RFC3339Nano))
	}
}

// Lost drops the lease at once: slotd said it is not current (it ran out,
// or the node was removed or declared failed). The node serves nothing
// until a registration grants a new one.
func (l *Lease) Lost() {
	cur := l.st.Load()
	if now := l.elapsed(); cur.until > now {
		l.st.CompareAndSwap(cur, &leaseState{lease: cur.lease, sent: cur.sent, deadline: l.base.Add(now), until: now})
	}
	_ = l.Check()
}

// elapsed is the lease's clock as an offset from base.
func (l *Lease) elapsed() time.Duration {
	if l.real {
		return time.Since(l.base)
	}
	return l.clock.Now().Sub(l.base)
}

// Check returns nil while the lease holds, else a *SelfFencedError.
func (l *Lease) Check() error {
	st := l.st.Load()
	if l.elapsed() < st.until {
		return nil
	}
	return l.lapsed(st)
}

// lapsed is Check's answer once the lease does not hold (out of line: the
// request path inlines Check's test).
func (l *Lease) lapsed(st *leaseState) error {
	err := &SelfFencedError{Node: l.id, LastRenewal: st.sent, Since: st.deadline}
	if l.fenced.CompareAndSwap(false, true) {
		l.lg.Warn("lease ran out: self-fenced, serving nothing until a renewal succeeds",
			"last_renewal", st.sent.Format(time.RFC3339Nano), "since", st.deadline.Format(time.RFC3339Nano))
	}
	return err
}

// SelfFenced reports whether the lease does not hold now.
func (l *Lease) SelfFenced() bool { return l.Check() != nil }
