package load

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports the aggregate at each scrape. Labels are bounded: a
// node id and a dimension, never a slot or a key.
//
//	slotd_node_load{node,dimension}        keys, bytes, reads, writes, ops (per second, ~10 min)
//	slotd_node_load_ratio{node,dimension}  keys, bytes, ops: load over the node's fair share
//	slotd_node_load_known{node}            1 while the node's report is live or it owns no slot, else 0
//	slotd_hot_slots                        slots whose load alone exceeds their node's band
//
// A node whose load is unknown has no slotd_node_load or ratio series at
// all (absent, never zero); a node with no fair share (not active) has no
// ratio.
func (a *Aggregator) Collector() prometheus.Collector { return collector{a} }

var (
	descLoad = prometheus.NewDesc("slotd_node_load",
		"Measured load of a node: keys, bytes, and reads, writes and ops (reads + writes) per second over ~10 minutes. Absent while unknown.",
		[]string{"node", "dimension"}, nil)
	descRatio = prometheus.NewDesc("slotd_node_load_ratio",
		"A node's measured load over its fair share (its weight over the active known nodes' weight, times the cluster's total) per dimension (keys, bytes, ops): 1 is balanced. Absent while unknown.",
		[]string{"node", "dimension"}, nil)
	descKnown = prometheus.NewDesc("slotd_node_load_known",
		"1 while the node's load is known: its last report is live (it reported within three of its intervals), or it owns no slot; else 0.",
		[]string{"node"}, nil)
	descHot = prometheus.NewDesc("slotd_hot_slots",
		"Slots whose load alone exceeds their node's band (fair share times 1 + tolerance) in bytes or ops: moving them cannot fix their node.",
		nil, nil)
)

type collector struct{ a *Aggregator }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLoad
	ch <- descRatio
	ch <- descKnown
	ch <- descHot
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	v := c.a.View(time.Now(), ViewOptions{})
	hot := map[uint16]bool{}
	for _, h := range v.HotSpots {
		hot[h.Slot] = true
	}
	ch <- prometheus.MustNewConstMetric(descHot, prometheus.GaugeValue, float64(len(hot)))
	for _, n := range v.Nodes {
		known := 0.0
		if n.Known {
			known = 1
		}
		ch <- prometheus.MustNewConstMetric(descKnown, prometheus.GaugeValue, known, n.ID)
		if !n.Known {
			continue
		}
		for _, d := range []string{DimKeys, DimBytes, DimReads, DimWrites, DimOps} {
			ch <- prometheus.MustNewConstMetric(descLoad, prometheus.GaugeValue, n.Value(d), n.ID, d)
		}
		for _, d := range RatioDims {
			if r, ok := n.Ratio(d); ok {
				ch <- prometheus.MustNewConstMetric(descRatio, prometheus.GaugeValue, r, n.ID, d)
			}
		}
	}
}
