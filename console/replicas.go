package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/clusterstatus"
	"github.com/slotd/slotd/slots"
)

// replicasMethod is the gRPC method whose policy rule decides who may read
// GET /api/v1/replicas (the read role in slotd's policy).
const replicasMethod = "/slotd.v1.Admin/ListReplicaSets"

// replicasJSON is GET /api/v1/replicas: every slot's replicas, for the
// under-replicated layer and the hover tip.
type replicasJSON struct {
	Version uint64 `json:"version"`
	RF      uint32 `json:"rf"`
	MinISR  uint32 `json:"min_isr"`
	// Nodes are the node ids, sorted, and Zones their zones ("" for none);
	// ISR[s] lists slot s's in-sync replicas as indexes into Nodes, the
	// primary first (empty before the bootstrap).
	Nodes []string `json:"nodes"`
	Zones []string `json:"zones"`
	ISR   [][]int  `json:"isr"`
	// Learners and States hold only the slots that have learners, and
	// that are not ok (under-replicated, below-min-isr, zone-violation),
	// by slot number.
	Learners map[string][]int  `json:"learners"`
	States   map[string]string `json:"states"`
}

// buildReplicas spreads the ranges of resp over the slots, naming nodes by
// their index among m's nodes (and any replica m does not list yet).
func buildReplicas(m *slotmap.Map, resp *slotdv1.ListReplicaSetsResponse) replicasJSON {
	out := replicasJSON{Version: resp.GetVersion(), RF: resp.GetPolicy().GetRf(), MinISR: resp.GetPolicy().GetMinIsr(),
		Nodes: []string{}, Zones: []string{}, ISR: make([][]int, slots.Count), Learners: map[string][]int{}, States: map[string]string{}}
	zone := map[string]string{}
	if m != nil {
		for _, n := range m.Nodes() {
			zone[n.ID] = n.Zone
			out.Nodes = append(out.Nodes, n.ID)
		}
	}
	for _, r := range resp.GetRanges() {
		for _, id := range append(slices.Clone(r.GetIsr()), r.GetLearners()...) {
			if !slices.Contains(out.Nodes, id) {
				out.Nodes = append(out.Nodes, id)
			}
		}
	}
	slices.Sort(out.Nodes)
	idx := make(map[string]int, len(out.Nodes))
	for i, id := range out.Nodes {
		idx[id] = i
		out.Zones = append(out.Zones, zone[id])
	}
	indexes := func(ids []string) []int {
		l := make([]int, len(ids))
		for i, id := range ids {
			l[i] = idx[id]
		}
		return l
	}
	for i := range out.ISR {
		out.ISR[i] = []int{}
	}
	for _, r := range resp.GetRanges() {
		isr, learners, state := indexes(r.GetIsr()), indexes(r.GetLearners()), clusterstatus.ReplicaSetState(r)
		for s := r.GetFrom(); s <= r.GetTo() && s < slots.Count; s++ {
			out.ISR[s] = isr
			key := strconv.Itoa(int(s))
			if len(learners) > 0 {
				out.Learners[key] = learners
			}
			if state != "ok" {
				out.States[key] = state
			}
		}
	}
	return out
}

// serveReplicas answers every slot's replicas, read once per version of
// the served map (a replica step is a new version, so the map's version
// moves with it).
func (h *Handler) serveReplicas(w http.ResponseWriter, r *http.Request) {
	if !h.authorize(w, r, replicasMethod) {
		return
	}
	m := h.cfg.Source.Map()
	h.serveVersioned(w, r, m, &h.replicasBody, "r", func() (any, bool, error) {
		ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
		defer cancel()
		resp, err := h.cfg.Source.Replicas(ctx)
		switch {
		case status.Code(err) == codes.FailedPrecondition:
			resp = &slotdv1.ListReplicaSetsResponse{} // not bootstrapped: no slot has replicas
		case err != nil:
			return nil, false, fmt.Errorf("replicas: %s", status.Convert(err).Message())
		}
		return buildReplicas(m, resp), m != nil && resp.GetVersion() > 0, nil
	})
}
