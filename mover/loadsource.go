package mover

import (
	"time"

	"github.com/slotd/slotd/mover/planner"
)

// LoadSource is the nodes' measured load as the mover uses it: plans are
// made on it (Control), and the automatic balancer balances by the ratios
// it gives (Balancer). It returns the last report of each node that
// reported recently, by node id; a node missing from the map has unknown
// load (it stopped reporting, or never did), never zero. load.Aggregator
// implements it; it must be safe for concurrent use.
type LoadSource interface {
	NodeLoads(now time.Time) map[string]planner.NodeLoad
}
