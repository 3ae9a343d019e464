package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/directory"
)

// Lease renewals refused, by reason (slotd_lease_renewals_refused_total).
const (
	refusedIdentity      = "identity"       // a caller renewing another node's lease
	refusedNotRegistered = "not_registered" // unknown, removed or declared failed
	refusedStale         = "stale_lease"    // a lease that ran out or was replaced
)

// leases is what this replica knows of the stores' leases: when each
// store stops serving unless it renews, as of the last grant or renewal
// made here, and the renewals it refused. Every replica exports its own;
// alerts take the max over replicas.
//
// Metrics:
//
//	slotd_node_lease_expiry_seconds{node}        Unix time at which the store stops serving unless it renews
//	slotd_lease_renewals_total                   renewals (and registrations) granted by this replica
//	slotd_lease_renewals_refused_total{reason}   renewals refused: identity, not_registered, stale_lease
type leases struct {
	mu     sync.Mutex
	expiry map[string]time.Time
	// known reports whether a node is still registered (the hub's map), so
	// that a removed node's series goes away.
	known func(id string) bool

	desc    *prometheus.Desc
	granted prometheus.Counter
	refused *prometheus.CounterVec
}

func newLeases() *leases {
	l := &leases{
		expiry: map[string]time.Time{},
		desc: prometheus.NewDesc("slotd_node_lease_expiry_seconds",
			"Unix time at which the store stops serving its slots unless it renews its lease, as of the last renewal this slotd granted (a later one through another replica moves it on: take the max over replicas).",
			[]string{"node"}, nil),
		granted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slotd_lease_renewals_total",
			Help: "Store lease renewals (heartbeats) and grants (registrations) this slotd made.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotd_lease_renewals_refused_total",
			Help: "Store lease renewals refused, by reason: identity (a node renewing another's), not_registered (unknown, removed or declared failed), stale_lease (expired or replaced: the store registers again).",
		}, []string{"reason"}),
	}
	for _, r := range []string{refusedIdentity, refusedNotRegistered, refusedStale} {
		l.refused.WithLabelValues(r)
	}
	return l
}

// renewed records a grant or renewal of node id's lease made now.
func (l *leases) renewed(id string, lease directory.Lease, now time.Time) {
	l.granted.Inc()
	l.mu.Lock()
	defer l.mu.Unlock()
	if exp := now.Add(lease.TTL - lease.Margin); exp.After(l.expiry[id]) {
		l.expiry[id] = exp
	}
}

// refusal counts a refused renewal of node id and returns err as the
// caller's status.
func (l *leases) refusal(id string, err error) error {
	reason := ""
	switch {
	case errors.Is(err, auth.ErrNotThisNode):
		reason = refusedIdentity
	case errors.Is(err, directory.ErrNotFound):
		reason = refusedNotRegistered
	case errors.Is(err, directory.ErrLeaseExpired):
		reason = refusedStale
	}
	if reason != "" {
		l.refused.WithLabelValues(reason).Inc()
	}
	return toStatus(fmt.Errorf("heartbeat of %s: %w", id, err))
}

// Describe implements prometheus.Collector.
func (l *leases) Describe(ch chan<- *prometheus.Desc) {
	ch <- l.desc
	l.granted.Describe(ch)
	l.refused.Describe(ch)
}

// Collect implements prometheus.Collector.
func (l *leases) Collect(ch chan<- prometheus.Metric) {
	l.granted.Collect(ch)
	l.refused.Collect(ch)
	l.mu.Lock()
	ids := make([]string, 0, len(l.expiry))
	for id := range l.expiry {
		if l.known != nil && !l.known(id) {
			delete(l.expiry, id)
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	exp := make([]time.Time, len(ids))
	for i, id := range ids {
		exp[i] = l.expiry[id]
	}
	l.mu.Unlock()
	for i, id := range ids {
		ch <- prometheus.MustNewConstMetric(l.desc, prometheus.GaugeValue, float64(exp[i].UnixNano())/1e9, id)
	}
}

// renewLease is Heartbeat's renewal: the caller must be the node, and the
// lease its current one.
func (s *AdminServer) renewLease(ctx context.Context, id string, lease int64) error {
	if err := auth.CheckNode(ctx, id); err != nil {
		return s.leases.refusal(id, err)
	}
	got, err := s.dir.RenewLease(ctx, id, directory.LeaseID(lease))
	if err != nil {
		if errors.Is(err, directory.ErrLeaseExpired) || errors.Is(err, directory.ErrNotFound) {
			s.lg.Warn("lease renewal refused; the store must register again", "node", id, "err", err)
		}
		return s.leases.refusal(id, err)
	}
	s.leases.renewed(id, got, time.Now())
	return nil
}
