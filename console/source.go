package console

import (
	"context"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/grpcapi"
	"github.com/slotd/slotd/load"
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

// FromService reads what the console shows from slotd's service (the
// served map, Status, ListNodes) and directory (history).
func FromService(svc *grpcapi.Service, dir *directory.Directory) Source {
	return serviceSource{svc: svc, dir: dir}
}

type serviceSource struct {
	svc *grpcapi.Service
	dir *directory.Directory
}

func (s serviceSource) Map() *slotmap.Map { return s.svc.Hub().Current() }

func (s serviceSource) Status(ctx context.Context) (*slotdv1.StatusResponse, error) {
	return s.svc.Admin().Status(ctx, &slotdv1.StatusRequest{})
}

func (s serviceSource) Nodes(ctx context.Context) (*slotdv1.ListNodesResponse, error) {
	return s.svc.Directory().ListNodes(ctx, &slotdv1.ListNodesRequest{})
}

func (s serviceSource) History(ctx context.Context, limit int) ([]directory.Change, error) {
	return s.dir.History(ctx, limit)
}

// FromAggregator reads measured load from slotd's load aggregate (the
// reports every store sends to every replica), as the planner sees it: a
// node whose report expired or never came is unmeasured; reads and writes
// are the ~10-minute averages.
func FromAggregator(agg *load.Aggregator) LoadSource { return aggregatorLoad{agg} }

type aggregatorLoad struct{ agg *load.Aggregator }

func (a aggregatorLoad) Loads(context.Context) (map[string]planner.NodeLoad, error) {
	return a.agg.NodeLoads(time.Now()), nil
}
