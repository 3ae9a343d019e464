package client

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// source is where a map update came from: refreshes' label.
type source uint8

const (
	sourceWatchFull source = iota
	sourceWatchDelta
	sourceFetch
	sourceRedirect
	numSources
)

// sourceLabels are the label values, index for index; a bounded set.
var sourceLabels = [numSources]string{"watch_full", "watch_delta", "fetch", "redirect"}

func (s source) String() string { return sourceLabels[s] }

type metrics struct {
	redirects *prometheus.CounterVec // kind: moved | ask
	refreshes *prometheus.CounterVec // source: watch_full | watch_delta | fetch | redirect
	// refreshed holds refreshes' counter for each source, looked up once:
	// every watcher counts every map change.
	refreshed  [numSources]prometheus.Counter
	version    prometheus.Gauge
	reconnects prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		redirects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotd_client_redirects_total",
			Help: "MOVED and ASK answers received by Do.",
		}, []string{"kind"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotd_client_map_refreshes_total",
			Help: "Map updates applied, by source (watch_full, watch_delta, fetch, redirect).",
		}, []string{"source"}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slotd_client_map_version",
			Help: "Directory version of the client's map.",
		}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slotd_client_watch_reconnects_total",
			Help: "Watch streams reopened after a failure or a gap.",
		}),
	}
	for _, k := range []string{"moved", "ask"} {
		m.redirects.WithLabelValues(k)
	}
	for s, label := range sourceLabels {
		m.refreshed[s] = m.refreshes.WithLabelValues(label)
	}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.all() {
		if err := reg.Register(c); err != nil {
			for _, done := range m.all()[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("client: register metrics (wrap the registerer to run two clients on one): %w", err)
		}
	}
	return m, nil
}

func (m *metrics) unregister(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for _, c := range m.all() {
		reg.Unregister(c)
	}
}

func (m *metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.redirects, m.refreshes, m.version, m.reconnects}
}
