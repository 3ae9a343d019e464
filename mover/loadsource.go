package mover

import (
	"time"

	"github.com/slotd/slotd/mover/planner"
)

// LoadSource gives the planner the nodes' measured load: the last report of
// each node that reported recently, by node id. A node missing from the map
// has unknown load (it stopped reporting, or never did), never zero.
// load.Aggregator implements it; it must be safe for concurrent use.
type LoadSource interface {
	NodeLoads(now time.Time) map[string]planner.NodeLoad
}
