package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// firstReadWait is how long a new watcher waits for the hub's first map.
const firstReadWait = 200 * time.Millisecond

// DirectoryServer serves slotdv1.Directory from the hub's map: reads cost
// no etcd round trip once the hub follows the directory.
type DirectoryServer struct {
	slotdv1.UnimplementedDirectoryServer
	cfg Config
	dir *directory.Directory
	hub *Hub
	m   *metrics
}

var _ slotdv1.DirectoryServer = (*DirectoryServer)(nil)

// current returns the map to answer from: the hub's, or, before the hub has
// one (the directory is not bootstrapped, or this replica just started),
// one read from etcd.
func (s *DirectoryServer) current(ctx context.Context) (*slotmap.Map, *slotdv1.SlotMap, error) {
	if v := s.hub.latest(); v != nil {
		return v.m, v.pb, nil
	}
	m, err := readMap(ctx, s.dir, s.cfg.Hub.ClusterID())
	if err != nil {
		return nil, nil, err
	}
	return m, m.Proto(), nil
}

// readMap reads the map from etcd: the full table, or the nodes alone
// before bootstrap.
func readMap(ctx context.Context, d *directory.Directory, clusterID string) (*slotmap.Map, error) {
	snap, err := d.Snapshot(ctx)
	if err == nil {
		return mapOf(snap, clusterID)
	}
	if !errors.Is(err, directory.ErrNotBootstrapped) {
		return nil, err
	}
	nodes, v, err := d.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	// A bootstrap may have committed between the two reads: then v is the
	// bootstrap's version and an unassigned map stamped with it would be
	// held by a store as if it were the bootstrapped one (nothing newer
	// follows until the next change). A second snapshot settles it: if it
	// still finds no table, the bootstrap, if any, came after the node read.
	if snap, err := d.Snapshot(ctx); err == nil {
		return mapOf(snap, clusterID)
	} else if !errors.Is(err, directory.ErrNotBootstrapped) {
		return nil, err
	}
	return unassignedMap(nodes, v, clusterID)
}

// GetMap implements slotdv1.DirectoryServer.
func (s *DirectoryServer) GetMap(ctx context.Context, req *slotdv1.GetMapRequest) (*slotdv1.GetMapResponse, error) {
	m, pb, err := s.current(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if n := req.GetIfNewerThan(); n > 0 && m.Version() <= n {
		return &slotdv1.GetMapResponse{Unchanged: true, Version: m.Version()}, nil
	}
	return &slotdv1.GetMapResponse{Version: m.Version(), Map: pb}, nil
}

// WatchMap implements slotdv1.DirectoryServer: the full map (unless the
// client's known_version is still covered by the kept deltas), then the
// deltas of every version in order, or the full map again after a gap.
// The stream ends with UNAVAILABLE when slotd shuts down.
func (s *DirectoryServer) WatchMap(req *slotdv1.WatchMapRequest, stream grpc.ServerStreamingServer[slotdv1.WatchMapResponse]) error {
	ctx := stream.Context()
	s.m.watchers.Inc()
	defer s.m.watchers.Dec()

	last := req.GetKnownVersion() // the version the client holds
	// A client ahead of this replica waits up to CatchUpWait for it to catch
	// up rather than being sent an older map it would refuse. A new client
	// of a hub without a map waits a moment for the hub's first read before
	// reading etcd itself.
	wait := s.cfg.CatchUpWait
	if last == 0 && s.hub.latest() == nil {
		wait = min(wait, firstReadWait)
	}
	patience := time.NewTimer(wait)
	defer patience.Stop()
	waited := false
	// Read once: the loop below runs for every version, in every stream.
	// patienceC is nil once it fired, so later selects wait on two channels.
	done, patienceC := ctx.Done(), patience.C
	for {
		cur, chain, ok, changed, closed := s.hub.since(last)
		if closed {
			return status.Error(codes.Unavailable, "slotd is shutting down; reconnect to another replica")
		}
		switch {
		case cur == nil && waited && last == 0:
			// The hub has no map: not bootstrapped yet (the hub only
			// follows a bootstrapped table), or still starting.
			m, err := readMap(ctx, s.dir, s.cfg.Hub.ClusterID())
			if err != nil {
				return toStatus(err)
			}
			if err := s.send(stream, mustEncode(fullUpdate(m.Proto())), s.m.sentFull); err != nil {
				return err
			}
			last = m.Version()
		case cur == nil:
			// Wait for the hub's first map.
		case cur.ver < last && !waited:
			// This replica is behind the client: wait for it.
		case ok:
			for _, v := range chain {
				if err := s.send(stream, v.delta, s.m.sentDelta); err != nil {
					return err
				}
			}
			last = cur.ver
		case cur.ver != last:
			if err := s.send(stream, cur.fullUpdate(), s.m.sentFull); err != nil {
				return err
			}
			last = cur.ver
		}
		select {
		case <-done:
			return ctx.Err()
		case <-patienceC:
			waited, patienceC = true, nil
		case <-changed:
		}
	}
}

func fullUpdate(pb *slotdv1.SlotMap) *slotdv1.WatchMapResponse {
	return &slotdv1.WatchMapResponse{Update: &slotdv1.WatchMapResponse_Full{Full: pb}}
}

func (s *DirectoryServer) send(stream grpc.ServerStream, e *encoded, sent prometheus.Counter) error {
	if err := stream.SendMsg(e); err != nil {
		return err
	}
	sent.Inc()
	return nil
}

// Lookup implements slotdv1.DirectoryServer.
func (s *DirectoryServer) Lookup(ctx context.Context, req *slotdv1.LookupRequest) (*slotdv1.LookupResponse, error) {
	var sl slots.Slot
	switch t := req.GetTarget().(type) {
	case *slotdv1.LookupRequest_Key:
		if len(t.Key) == 0 {
			return nil, invalid("lookup: the key is empty; pass a non-empty key or a slot")
		}
		sl = slots.ForKey(t.Key)
	case *slotdv1.LookupRequest_Slot:
		var err error
		if sl, err = slotOf(t.Slot); err != nil {
			return nil, toStatus(err)
		}
	default:
		return nil, invalid("lookup: pass a key or a slot")
	}
	m, _, err := s.current(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if m.Empty() {
		return nil, status.Error(codes.FailedPrecondition, "lookup: the directory is not bootstrapped; run slotctl bootstrap")
	}
	r := m.RouteSlot(sl)
	resp := &slotdv1.LookupResponse{Slot: uint32(sl.Uint16()), Owner: r.Owner(), Address: r.Addr(), Version: m.Version()}
	if mg, ok := m.Migration(sl); ok {
		resp.Migration = &slotdv1.Migration{Slot: uint32(mg.Slot.Uint16()), From: mg.From, To: mg.To, Phase: mg.Phase, MoveId: mg.MoveID}
	}
	return resp, nil
}

// ListNodes implements slotdv1.DirectoryServer.
func (s *DirectoryServer) ListNodes(ctx context.Context, _ *slotdv1.ListNodesRequest) (*slotdv1.ListNodesResponse, error) {
	m, _, err := s.current(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	counts := map[string]uint32{}
	if !m.Empty() {
		for i := range slots.Count {
			counts[m.OwnerID(slots.MustNew(i))]++
		}
	}
	// Heartbeats are not part of the map (they change every second and
	// would wake every watcher): they are read from etcd here.
	live, err := s.dir.Liveness(ctx)
	if err != nil {
		return nil, toStatus(fmt.Errorf("list nodes: %w", err))
	}
	resp := &slotdv1.ListNodesResponse{Version: m.Version()}
	for _, n := range m.Nodes() {
		l := live[n.ID]
		resp.Nodes = append(resp.Nodes, &slotdv1.NodeInfo{
			Node:          &slotdv1.Node{Id: n.ID, Address: n.Addr, Zone: n.Zone, Weight: n.Weight, State: n.State},
			Slots:         counts[n.ID],
			LastHeartbeat: ts(l.LastHeartbeat),
			HoldDownUntil: ts(l.HoldDownUntil),
			LeaseGranted:  ts(l.LeaseGranted),
			LeaseExpires:  ts(l.LeaseExpires),
			OrphanBytes:   l.OrphanBytes,
		})
	}
	return resp, nil
}
