package mover

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotd/slotd/directory"
)

// metrics are the executor's Prometheus metrics. Labels are bounded: a
// result or a node id, never a slot or a key.
type metrics struct {
	moves          *prometheus.CounterVec
	bytesMoved     prometheus.Counter
	keysMoved      prometheus.Counter
	bytesRemaining prometheus.Gauge
	throttle       prometheus.Gauge
	moveDuration   prometheus.Histogram
	cutover        prometheus.Histogram
	leader         prometheus.Gauge
	nodeSlots      *prometheus.GaugeVec
	slotRatio      *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotd_mover_moves_total", Help: "Slot moves finished, by result: committed, skipped, aborted (back to pending, or for good when the plan was cancelled), failed.",
		}, []string{"result"}),
		bytesMoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slotd_mover_bytes_moved_total", Help: "Key and value bytes applied on move targets.",
		}),
		keysMoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slotd_placement_keys_moved_total", Help: "Keys (and captured changes) applied on move targets: the keys that placement changes moved.",
		}),
		bytesRemaining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slotd_mover_plan_bytes_remaining", Help: "Estimated bytes still to move in the active plan.",
		}),
		throttle: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slotd_mover_throttle_bytes_per_second", Help: "Donor byte rate in force (0: unlimited).",
		}),
		moveDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "slotd_mover_move_duration_seconds", Help: "Time from begin to commit of one slot move.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 20),
		}),
		cutover: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "slotd_mover_cutover_pause_seconds", Help: "Write pause of a moved slot: from the source's fence to the directory commit.",
			// Half-octave bounds (..., 12.8, 18.1, 25.6 ms, ...): a pause
			// target of 20 ms needs a bound between 12.8 and 25.6.
			Buckets: prometheus.ExponentialBuckets(0.0001, math.Sqrt2, 36),
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slotd_mover_is_leader", Help: "1 while this slotd runs the cluster's mover.",
		}),
		nodeSlots: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "slotd_node_slots", Help: "Slots owned by each node.",
		}, []string{"node"}),
		slotRatio: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "slotd_node_slot_ratio", Help: "Node's slots over its weighted fair share of the slots (1 is balanced). Measured load is slotd_node_load_ratio.",
		}, []string{"node"}),
	}
	if reg != nil {
		reg.MustRegister(m.moves, m.bytesMoved, m.keysMoved, m.bytesRemaining, m.throttle,
			m.moveDuration, m.cutover, m.leader, m.nodeSlots, m.slotRatio)
	}
	return m
}

// observeTable sets the per-node gauges from a snapshot. The load ratio
// compares a node's slots with its weighted fair share, so 1.0 is balanced
// for any weights.
func (m *metrics) observeTable(snap *directory.Snapshot) {
	counts := snap.Counts()
	total := 0
	for _, n := range snap.Nodes {
		if n.State == directory.NodeActive {
			total += n.Weight
		}
	}
	m.nodeSlots.Reset()
	m.slotRatio.Reset()
	for _, n := range snap.Nodes {
		m.nodeSlots.WithLabelValues(n.ID).Set(float64(counts[n.ID]))
		if total > 0 && n.Weight > 0 {
			share := float64(16384) * float64(n.Weight) / float64(total)
			m.slotRatio.WithLabelValues(n.ID).Set(float64(counts[n.ID]) / share)
		}
	}
}
