package console

import (
	"context"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/load"
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
	// Replicas is slotd.v1.Admin/ListReplicaSets: every slot's replicas
	// (FAILED_PRECONDITION before the bootstrap).
	Replicas(ctx context.Context) (*slotdv1.ListReplicaSetsResponse, error)
}

// LoadSource is where measured load comes from: the slotd's view of its
// stores' load reports, with every slot's load (load.ViewOptions.Slots),
// as Load.Get answers it. A node whose load is unknown shows grey, never
// zero; a slot its owner's report does not list holds no data and sees no
// traffic (measured zero).
type LoadSource interface {
	View(ctx context.Context) (load.View, error)
}
