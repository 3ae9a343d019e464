package server

import (
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/load"
	"github.com/slotd/slotd/mover"
)

// autoLoad gives the automatic balancer the measured load ratios of this
// replica's load aggregate (every replica receives every report, so the
// mover's leader has them at once).
type autoLoad struct {
	agg *load.Aggregator
	now func() time.Time
}

var _ mover.AutoLoad = autoLoad{}

// AutoRatios implements mover.AutoLoad: the ratio in dimension of every
// node active in snap whose load is known, and which nodes reported.
func (a autoLoad) AutoRatios(snap *directory.Snapshot, dimension string) ([]mover.AutoRatio, map[string]bool) {
	v := a.agg.View(a.now(), load.ViewOptions{})
	reported := map[string]bool{}
	var out []mover.AutoRatio
	for _, nv := range v.Nodes {
		reported[nv.ID] = nv.Known
		n, ok := snap.Node(nv.ID)
		if !ok || n.State != directory.NodeActive {
			continue
		}
		if r, ok := nv.Ratio(dimension); ok {
			out = append(out, mover.AutoRatio{Node: nv.ID, Dimension: dimension, Ratio: r})
		}
	}
	return out, reported
}
