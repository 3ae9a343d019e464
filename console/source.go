package console

import (
	"context"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover/planner"
)

// Source is what the console shows, read in slotd's own process.
type Source interface {
	// Map returns the map slotd serves, nil before the directory is
	// bootstrapped.
	Map() *slotmap.Map
	// Status is slotd.v1.Admin/Status: nodes, the active plan, moves in
	// flight, the throttle.
	Status(ctx context.Context) (*slotdv1.StatusResponse, error)
	// Nodes is slotd.v1.Directory/ListNodes (last heartbeats).
	Nodes(ctx context.Context) (*slotdv1.ListNodesResponse, error)
	// History returns the newest limit changes, oldest first.
	History(ctx context.Context, limit int) ([]directory.Change, error)
}

// LoadSource is where measured load comes from: each node's last load
// report (per-slot keys, bytes and request rates, hottest keys) by node id.
// A node with no report is unmeasured: its slots show grey, never zero.
// A slot its owner's report does not list holds no data and sees no
// traffic (measured zero).
type LoadSource interface {
	Loads(ctx context.Context) (map[string]planner.NodeLoad, error)
}
