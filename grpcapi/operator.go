package grpcapi

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
)

// ReasonMetadata is the request metadata key that carries an operator's
// --reason for any change; it is recorded in the audit log (and in history
// for changes that keep a reason).
const ReasonMetadata = "slotd-reason"

// maxReasonLen bounds a reason taken from metadata (the directory refuses
// longer ones, and a reason is for people).
const maxReasonLen = 1024

// reasonOf returns the reason the caller gave in the request's metadata.
func reasonOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(ReasonMetadata)
	if len(v) == 0 {
		return ""
	}
	r := strings.Join(strings.Fields(v[0]), " ")
	if len(r) > maxReasonLen {
		r = r[:maxReasonLen]
	}
	return r
}

// audited returns ctx carrying the audit entry of an action (see
// directory.WithAudit): the write that is the action records it, in its own
// transaction, with the caller's identity and reason. It also returns the
// operator recorded.
func (s *AdminServer) audited(ctx context.Context, kind directory.AuditKind, action, planID, node, claimed string) (context.Context, string) {
	op := s.operator(ctx, claimed)
	return directory.WithAudit(ctx, directory.AuditEntry{
		Kind: kind, Action: action, PlanID: planID, Node: node, By: op, Reason: reasonOf(ctx),
	}), op
}

// OperatorServer serves slotdv1.Operator: the audit log and guarded node
// edits. It shares the AdminServer's directory and identity rules.
type OperatorServer struct {
	slotdv1.UnimplementedOperatorServer
	a *AdminServer
}

var _ slotdv1.OperatorServer = (*OperatorServer)(nil)

// AddNode implements slotdv1.OperatorServer.
func (o *OperatorServer) AddNode(ctx context.Context, req *slotdv1.AddNodeRequest) (*slotdv1.AddNodeResponse, error) {
	pn := req.GetNode()
	if pn.GetId() == "" || pn.GetAddress() == "" {
		return nil, invalid("add node: id and address are required")
	}
	n := directory.Node{ID: pn.GetId(), Addr: pn.GetAddress(), Zone: pn.GetZone(), Weight: int(pn.GetWeight())}
	if n.Weight == 0 {
		n.Weight = 1
	}
	ctx, _ = o.a.audited(ctx, directory.AuditNode, directory.ActionNodeAdd, "", n.ID, req.GetOperator())
	_, added, err := o.a.dir.AddNode(ctx, n)
	if err != nil {
		return nil, zoneHint(err, "add zone=ZONE to the node spec")
	}
	if added {
		// As RegisterNode does: the node counts as alive for one TTL, so
		// that a store starting now is not marked down before it beats.
		if err := o.a.dir.Touch(ctx, n.ID); err != nil {
			return nil, toStatus(err)
		}
	}
	node, v, err := o.a.node(ctx, n.ID)
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.AddNodeResponse{Node: node, Version: v, Added: added}, nil
}

// DefaultLogLimit is Log's page size when the request gives none.
const DefaultLogLimit = 100

var logKinds = map[directory.AuditKind]slotdv1.LogKind{
	directory.AuditCluster: slotdv1.LogKind_LOG_KIND_CLUSTER,
	directory.AuditNode:    slotdv1.LogKind_LOG_KIND_NODE,
	directory.AuditPlan:    slotdv1.LogKind_LOG_KIND_PLAN,
}

// Log implements slotdv1.OperatorServer: audit entries (plans, nodes, the
// cluster) and per-move history entries, merged newest first.
func (o *OperatorServer) Log(ctx context.Context, req *slotdv1.LogRequest) (*slotdv1.LogResponse, error) {
	limit := int(req.GetLimit())
	switch {
	case limit == 0:
		limit = DefaultLogLimit
	case limit > maxHistoryLimit:
		return nil, invalid(fmt.Sprintf("log: limit %d is more than %d", limit, maxHistoryLimit))
	}
	kind := req.GetKind()
	if _, ok := slotdv1.LogKind_name[int32(kind)]; !ok {
		return nil, invalid(fmt.Sprintf("log: unknown kind %d", kind))
	}
	match := func(plan, node, from, to string) bool {
		if id := req.GetPlanId(); id != "" && plan != id {
			return false
		}
		if id := req.GetNodeId(); id != "" && node != id && from != id && to != id {
			return false
		}
		return true
	}
	// Filters apply after the read, so read every kept entry when there
	// are filters; the bounds keep that to a few MB.
	readLimit := limit
	if req.GetPlanId() != "" || req.GetNodeId() != "" {
		readLimit = 0
	}
	var out []*slotdv1.LogEntry
	if kind != slotdv1.LogKind_LOG_KIND_MOVE {
		q := directory.AuditQuery{Limit: readLimit}
		for k, lk := range logKinds {
			if lk == kind {
				q.Kind = k
			}
		}
		entries, err := o.a.dir.Audit(ctx, q)
		if err != nil {
			return nil, toStatus(err)
		}
		for _, e := range entries {
			if match(e.PlanID, e.Node, "", "") {
				out = append(out, auditProto(e))
			}
		}
	}
	if kind == slotdv1.LogKind_LOG_KIND_UNSPECIFIED || kind == slotdv1.LogKind_LOG_KIND_MOVE {
		changes, err := o.a.dir.History(ctx, 0)
		if err != nil {
			return nil, toStatus(err)
		}
		n := 0
		for _, c := range slices.Backward(changes) {
			if !strings.HasPrefix(c.Kind, "move-") || !match(c.PlanID, c.Node, c.From, c.To) {
				continue
			}
			out = append(out, moveLogProto(c))
			if n++; readLimit > 0 && n == readLimit {
				break
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *slotdv1.LogEntry) int { return b.GetTime().AsTime().Compare(a.GetTime().AsTime()) })
	if len(out) > limit {
		out = out[:limit]
	}
	if req.GetReverse() { // the same newest entries, oldest first
		slices.Reverse(out)
	}
	return &slotdv1.LogResponse{Entries: out}, nil
}

func auditProto(e directory.AuditEntry) *slotdv1.LogEntry {
	return &slotdv1.LogEntry{
		Kind: logKinds[e.Kind], Action: e.Action, Time: ts(e.At), Version: e.Version, NodeId: e.Node,
		PlanId: e.PlanID, Operator: e.By, Reason: e.Reason, Detail: e.Detail,
	}
}

func moveLogProto(c directory.Change) *slotdv1.LogEntry {
	e := &slotdv1.LogEntry{
		Kind: slotdv1.LogKind_LOG_KIND_MOVE, Action: c.Kind, Time: ts(c.At), Version: c.Version,
		PlanId: c.PlanID, HasSlot: true, Slot: uint32(c.Slot.Uint16()), From: c.From, To: c.To, MoveId: c.MoveID,
		Operator: c.By, Reason: c.Reason,
	}
	if c.Kind == directory.ChangeMoveAdvance && c.Phase != "" {
		e.Detail = "phase " + string(c.Phase)
	}
	return e
}
