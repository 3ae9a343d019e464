package directory

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ReplicaCollector exports how the slots' replica sets stand, read from
// the directory at each scrape (Snapshot.ReplicaSummary). Every slotd
// replica exports the same values, so alerts take the max over replicas.
// Nothing is exported before the bootstrap.
//
// Metrics:
//
//	slotd_slots_under_replicated          slots with fewer in-sync replicas than rf
//	slotd_slots_below_min_isr             slots with fewer in-sync replicas than min_isr
//	slotd_zone_violations                 slots whose replicas do not sit in distinct zones (always 0)
//	slotd_replication_factor              the policy's rf
//	slotd_node_replicas{node,role}        slots each node holds as primary, follower or learner
//	slotd_replica_read_errors_total       scrapes whose read of the directory failed (the gauges are left out then)
type ReplicaCollector struct {
	dir     *Directory
	timeout time.Duration
	lg      *slog.Logger

	under, belowMin, violations, rf, nodeReplicas *prometheus.Desc
	readErrors                                    prometheus.Counter
}

var _ prometheus.Collector = (*ReplicaCollector)(nil)

// Roles are the role label values of slotd_node_replicas, in order.
var Roles = []string{"primary", "follower", "learner"}

// NewReplicaCollector returns a collector over d; register it on the
// process's registry. Each scrape reads the directory once, within timeout
// (default 2 s).
func NewReplicaCollector(d *Directory, timeout time.Duration, lg *slog.Logger) *ReplicaCollector {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &ReplicaCollector{
		dir: d, timeout: timeout, lg: lg,
		under: prometheus.NewDesc("slotd_slots_under_replicated",
			"Slots with fewer in-sync replicas than the replication factor (rf).", nil, nil),
		belowMin: prometheus.NewDesc("slotd_slots_below_min_isr",
			"Slots with fewer in-sync replicas than min_isr: their writes stop.", nil, nil),
		violations: prometheus.NewDesc("slotd_zone_violations",
			"Slots whose replicas do not sit in distinct zones (two in one zone, or one without a zone beside others); the directory refuses every change that makes one, so it stays 0.", nil, nil),
		rf: prometheus.NewDesc("slotd_replication_factor",
			"Replicas the policy keeps of every slot, each in its own zone (rf).", nil, nil),
		nodeReplicas: prometheus.NewDesc("slotd_node_replicas",
			"Slots each node holds, by role: primary, follower (in sync) or learner (being filled).", []string{"node", "role"}, nil),
		readErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slotd_replica_read_errors_total",
			Help: "Scrapes whose directory read failed; the replica gauges were left out of them.",
		}),
	}
}

// Describe implements prometheus.Collector.
func (c *ReplicaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.under, c.belowMin, c.violations, c.rf, c.nodeReplicas} {
		ch <- d
	}
	c.readErrors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *ReplicaCollector) Collect(ch chan<- prometheus.Metric) {
	defer c.readErrors.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	snap, err := c.dir.Snapshot(ctx)
	if errors.Is(err, ErrNotBootstrapped) {
		return
	}
	if err != nil {
		c.readErrors.Inc()
		c.lg.Debug("replica metrics: directory unreadable", "err", err)
		return
	}
	sum := snap.ReplicaSummary()
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	gauge(c.under, sum.UnderReplicated)
	gauge(c.belowMin, sum.BelowMinISR)
	gauge(c.violations, sum.ZoneViolations)
	gauge(c.rf, snap.Replication.RF)
	for _, n := range snap.Nodes {
		h := sum.Nodes[n.ID]
		for i, v := range []int{h.Primaries, h.Followers, h.Learners} {
			gauge(c.nodeReplicas, v, n.ID, Roles[i])
		}
	}
}
