package grpcapi

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus metrics, slotd_service_*.
type metrics struct {
	watchers prometheus.Gauge
	sends    *prometheus.CounterVec // kind: full, delta
	// sentFull and sentDelta are sends' two children, looked up once: a
	// change costs one increment per watcher.
	sentFull, sentDelta prometheus.Counter
	leases              *leases
}

// hubMetrics are the hub's: the map this replica serves.
type hubMetrics struct {
	version  prometheus.Gauge
	mapBytes prometheus.Gauge
}

func newHubMetrics(reg prometheus.Registerer) (*hubMetrics, error) {
	m := &hubMetrics{
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slotd_service_map_version",
			Help: "Directory version of the map this replica serves.",
		}),
		mapBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slotd_service_map_bytes",
			Help: "Encoded size of the full map this replica serves.",
		}),
	}
	return m, register(reg, m.version, m.mapBytes)
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slotd_service_watchers",
			Help: "Open WatchMap streams.",
		}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotd_service_watch_updates_total",
			Help: "Updates sent on WatchMap streams, by kind (full, delta).",
		}, []string{"kind"}),
		leases: newLeases(),
	}
	m.sentFull = m.sends.WithLabelValues("full")
	m.sentDelta = m.sends.WithLabelValues("delta")
	return m, register(reg, m.watchers, m.sends, m.leases)
}

// register registers cs on reg (nothing without one).
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return fmt.Errorf("%w: metrics already registered; give each service its own registerer", ErrInvalidConfig)
			}
			return fmt.Errorf("service: register metrics: %w", err)
		}
	}
	return nil
}
