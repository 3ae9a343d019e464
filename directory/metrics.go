package directory

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the directory's Prometheus metrics. A nil *metrics (no
// Registerer configured) records nothing.
type metrics struct {
	version   prometheus.Gauge
	conflicts prometheus.Counter
	txns      *prometheus.HistogramVec
	group     prometheus.Histogram
	unknown   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slotd_directory_version",
			Help: "Latest directory version this process has read or written.",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slotd_directory_conflicts_total",
			Help: "Directory writes that lost a compare-and-swap race (each is retried or returned as ErrConflict).",
		}),
		txns: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "slotd_directory_txn_duration_seconds",
			Help:    "Latency of directory write transactions by result (applied, conflict, error).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"result"}),
		group: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "slotd_directory_changes_per_txn",
			Help:    "Changes written per directory transaction (concurrent updates are group-committed).",
			Buckets: []float64{1, 2, 4, 8, 16},
		}),
		unknown: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotd_directory_unknown_writes_total",
			Help: "Directory write transactions etcd did not answer in time (outcome sent; the write is re-read and retried), and those found applied afterwards (outcome applied).",
		}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{m.version, m.conflicts, m.txns, m.group, m.unknown} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("directory: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) setVersion(v uint64) {
	if m != nil {
		m.version.Set(float64(v))
	}
}

func (m *metrics) unknownWrites(outcome string) {
	if m != nil {
		m.unknown.WithLabelValues(outcome).Inc()
	}
}

func (m *metrics) conflict() {
	if m != nil {
		m.conflicts.Inc()
	}
}

func (m *metrics) observeTxn(d time.Duration, result string) {
	if m == nil {
		return
	}
	m.txns.WithLabelValues(result).Observe(d.Seconds())
}

func (m *metrics) grouped(n int) {
	if m != nil {
		m.group.Observe(float64(n))
	}
}
