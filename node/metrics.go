package node

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	writes      *prometheus.CounterVec
	redirects   *prometheus.CounterVec
	exportBytes prometheus.Counter
	importBytes prometheus.Counter
	fenced      prometheus.Gauge
	throttle    prometheus.Gauge

	orphanBytes      prometheus.Gauge
	reconcileActions *prometheus.CounterVec
}

// newMetrics registers the node's metrics on reg; a nil reg keeps them
// unregistered (they still count, nobody scrapes them). With a lease, the
// node also exports slotd_node_self_fenced.
func newMetrics(reg prometheus.Registerer, lease *Lease) *metrics {
	m := &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotd_node_writes_total",
			Help: "Writes through the node library, by result (ok, redirect, unavailable, error).",
		}, []string{"result"}),
		redirects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotd_node_redirects_total",
			Help: "Requests answered with a redirect, by kind (moved, ask).",
		}, []string{"kind"}),
		exportBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slotd_node_export_bytes_total",
			Help: "Key and value bytes sent by slot exports and change streams.",
		}),
		importBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slotd_node_import_bytes_total",
			Help: "Key and value bytes applied by slot imports.",
		}),
		fenced: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slotd_node_fenced_slots",
			Help: "Slots currently fenced on this node.",
		}),
		throttle: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slotd_node_export_throttle_bytes_per_second",
			Help: "Current export throttle; 0 means unlimited.",
		}),
		orphanBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slotd_node_orphan_bytes",
			Help: "Bytes of slots this node holds that nothing in its map explains (left copies being dropped or waiting out the reconcile grace).",
		}),
		reconcileActions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotd_node_reconcile_actions_total",
			Help: "Clean-ups started by reconciliation, by kind (drop, end_capture, forget_import, unfence).",
		}, []string{"kind"}),
	}
	for _, k := range []string{actDrop, actEndCapture, actForgetImport, actUnfence} {
		m.reconcileActions.WithLabelValues(k)
	}
	if reg != nil {
		reg.MustRegister(m.writes, m.redirects, m.exportBytes, m.importBytes, m.fenced, m.throttle, m.orphanBytes, m.reconcileActions)
		if lease != nil {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "slotd_node_self_fenced",
				Help: "1 while the node serves none of its slots because it could not renew its lease from slotd in time (cut off from slotd, or not registered yet).",
			}, func() float64 {
				if lease.SelfFenced() {
					return 1
				}
				return 0
			}))
		}
	}
	return m
}
