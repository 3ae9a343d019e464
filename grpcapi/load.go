package grpcapi

import (
	"context"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/load"
	"github.com/slotd/slotd/slots"
)

// LoadServer implements slotdv1.LoadServer over this replica's aggregate.
type LoadServer struct {
	slotdv1.UnimplementedLoadServer
	agg *load.Aggregator
	now func() time.Time
}

// Report implements slotdv1.LoadServer. A caller bound to a node id may
// report only as that node (PERMISSION_DENIED); see load.Aggregator.Report
// for the other refusals. Nothing changes on any error.
func (s *LoadServer) Report(ctx context.Context, req *slotdv1.LoadReport) (*slotdv1.LoadReportResponse, error) {
	if err := auth.CheckNode(ctx, req.GetNodeId()); err != nil {
		return nil, toStatus(err)
	}
	if err := s.agg.Report(s.now(), req); err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.LoadReportResponse{}, nil
}

// Get implements slotdv1.LoadServer.
func (s *LoadServer) Get(ctx context.Context, req *slotdv1.GetLoadRequest) (*slotdv1.GetLoadResponse, error) {
	return s.agg.View(s.now(), load.ViewOptions{Nodes: req.GetNodeIds(), Slots: req.GetSlots()}).Proto(), nil
}

// The aggregator checks reports against the hub's map.
var _ load.Map = (*Hub)(nil)

// ChangedSince collects the slots of the kept deltas after version v. A
// replica may not have published v itself (it can see two directory
// changes as one version): a kept delta that spans v counts whole, which
// only ever adds slots.
func (h *Hub) ChangedSince(v uint64) (slots.Set, bool) {
	var changed slots.Set
	st := h.st.Load()
	if st.closed || len(st.recent) == 0 {
		return changed, false
	}
	for i := len(st.recent) - 1; i >= 0; i-- {
		ver := st.recent[i]
		if ver.ver <= v {
			return changed, true // every change after v is counted
		}
		if ver.delta == nil {
			return changed, false // a full map: what changed is not kept
		}
		resp, _ := ver.delta.msg.(*slotdv1.WatchMapResponse)
		for _, so := range resp.GetDelta().GetSlots() {
			if s, err := slots.New(int(so.GetSlot())); err == nil {
				changed.Add(s)
			}
		}
		if ver.from <= v {
			return changed, true
		}
	}
	return changed, false
}
