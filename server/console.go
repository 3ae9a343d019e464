package server

import (
	"context"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/console"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/grpcapi"
	"github.com/slotd/slotd/load"
)

// consoleSource is what the web console shows, read in this process: the
// hub's map, the Admin and Directory servers' answers (Status, ListNodes)
// and the directory's history.
type consoleSource struct {
	hub *grpcapi.Hub
	svc *grpcapi.Service
	dir *directory.Directory
}

var _ console.Source = consoleSource{}

func (s consoleSource) Map() *slotmap.Map { return s.hub.Current() }

func (s consoleSource) Status(ctx context.Context) (*slotdv1.StatusResponse, error) {
	return s.svc.Admin().Status(ctx, &slotdv1.StatusRequest{})
}

func (s consoleSource) Nodes(ctx context.Context) (*slotdv1.ListNodesResponse, error) {
	return s.svc.Directory().ListNodes(ctx, &slotdv1.ListNodesRequest{})
}

func (s consoleSource) Replicas(ctx context.Context) (*slotdv1.ListReplicaSetsResponse, error) {
	return s.svc.Admin().ListReplicaSets(ctx, &slotdv1.ListReplicaSetsRequest{})
}

func (s consoleSource) History(ctx context.Context, limit int) ([]directory.Change, error) {
	return s.dir.History(ctx, limit)
}

// consoleLoad is the console's measured load: this replica's aggregate of
// the stores' reports, as Load.Get answers it with every slot's load (a
// node whose report expired or never came is unknown; reads and writes are
// the ~10-minute averages).
type consoleLoad struct{ agg *load.Aggregator }

var _ console.LoadSource = consoleLoad{}

func (l consoleLoad) View(context.Context) (load.View, error) {
	return l.agg.View(time.Now(), load.ViewOptions{Slots: true}), nil
}
