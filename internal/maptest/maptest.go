package maptest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/slots"
)

// State is an in-memory directory: a slotmap.Feed, which is what slotd's
// watch serves from too. Safe for concurrent use.
type State struct {
	feed *slotmap.Feed
}

// NewState returns a directory holding m.
func NewState(m *slotmap.Map) *State {
	return &State{feed: slotmap.NewFeed(m, 0)}
}

// Set publishes m, which must be newer than the current map (a test that
// does otherwise is wrong, so Set panics); watchers receive the delta.
func (s *State) Set(m *slotmap.Map) {
	if err := s.feed.Publish(m); err != nil {
		panic(fmt.Sprintf("maptest: %v", err))
	}
}

// Map returns the current map.
func (s *State) Map() *slotmap.Map {
	m, _ := s.feed.Current()
	return m
}

// Server serves a State's Directory over gRPC on 127.0.0.1.
type Server struct {
	slotdv1.UnimplementedDirectoryServer
	state *State
	lis   net.Listener
	srv   *grpc.Server
	done  chan struct{} // closed when Serve returns

	getMaps atomic.Int64
	watches atomic.Int64
}

// Start listens on addr (use "127.0.0.1:0" for a free port, or a stopped
// server's Addr to restart it in place) and serves until Stop.
func Start(st *State, addr string) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("maptest: listen %s: %w", addr, err)
	}
	// Permit the SDK's keepalive pings, as slotd must (see directory.proto).
	srv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
		MinTime:             5 * time.Second,
		PermitWithoutStream: true,
	}))
	s := &Server{state: st, lis: lis, srv: srv, done: make(chan struct{})}
	slotdv1.RegisterDirectoryServer(s.srv, s)
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(lis) // returns when Stop closes the listener
	}()
	return s, nil
}

// Addr returns host:port.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Stop closes the listener and every connection at once (like a crash, as
// far as clients can tell) and waits for the handlers to return.
func (s *Server) Stop() {
	s.srv.Stop()
	<-s.done
}

// GetMapCalls returns how many GetMap calls the server answered.
func (s *Server) GetMapCalls() int64 { return s.getMaps.Load() }

// WatchCalls returns how many WatchMap streams the server opened.
func (s *Server) WatchCalls() int64 { return s.watches.Load() }

// GetMap implements slotdv1.DirectoryServer.
func (s *Server) GetMap(_ context.Context, req *slotdv1.GetMapRequest) (*slotdv1.GetMapResponse, error) {
	s.getMaps.Add(1)
	m, pb := s.state.feed.Current()
	if req.GetIfNewerThan() > 0 && m.Version() <= req.GetIfNewerThan() {
		return &slotdv1.GetMapResponse{Unchanged: true, Version: m.Version()}, nil
	}
	return &slotdv1.GetMapResponse{Version: m.Version(), Map: pb}, nil
}

// WatchMap implements slotdv1.DirectoryServer.
func (s *Server) WatchMap(req *slotdv1.WatchMapRequest, stream grpc.ServerStreamingServer[slotdv1.WatchMapResponse]) error {
	s.watches.Add(1)
	return s.state.feed.Watch(stream.Context(), req.GetKnownVersion(), stream.Send)
}

// Lookup implements slotdv1.DirectoryServer.
func (s *Server) Lookup(_ context.Context, req *slotdv1.LookupRequest) (*slotdv1.LookupResponse, error) {
	var sl slots.Slot
	switch t := req.GetTarget().(type) {
	case *slotdv1.LookupRequest_Key:
		if len(t.Key) == 0 {
			return nil, status.Error(codes.InvalidArgument, "lookup: empty key; pass a key or a slot")
		}
		sl = slots.ForKey(t.Key)
	case *slotdv1.LookupRequest_Slot:
		var err error
		if sl, err = slots.New(int(t.Slot)); err != nil {
			return nil, status.Error(codes.InvalidArgument, "lookup: "+err.Error())
		}
	default:
		return nil, status.Error(codes.InvalidArgument, "lookup: pass a key or a slot")
	}
	m := s.state.Map()
	if m.Empty() {
		return nil, status.Error(codes.FailedPrecondition, "lookup: the directory is not bootstrapped")
	}
	r := m.RouteSlot(sl)
	resp := &slotdv1.LookupResponse{Slot: uint32(sl.Uint16()), Owner: r.Owner(), Address: r.Addr(), Version: m.Version()}
	if mg, ok := m.Migration(sl); ok {
		resp.Migration = &slotdv1.Migration{Slot: uint32(mg.Slot.Uint16()), From: mg.From, To: mg.To, Phase: mg.Phase, MoveId: mg.MoveID}
	}
	return resp, nil
}

// ListNodes implements slotdv1.DirectoryServer.
func (s *Server) ListNodes(context.Context, *slotdv1.ListNodesRequest) (*slotdv1.ListNodesResponse, error) {
	m := s.state.Map()
	resp := &slotdv1.ListNodesResponse{Version: m.Version()}
	for _, n := range m.Nodes() {
		set := m.SlotsOf(n.ID)
		resp.Nodes = append(resp.Nodes, &slotdv1.NodeInfo{
			Node:  &slotdv1.Node{Id: n.ID, Address: n.Addr, Zone: n.Zone, Weight: n.Weight, State: n.State},
			Slots: uint32(set.Count()),
		})
	}
	return resp, nil
}

// RoundRobin returns a map at version where slot s belongs to
// nodes[s % len(nodes)].
func RoundRobin(version uint64, nodes []slotmap.Node) (*slotmap.Map, error) {
	if len(nodes) == 0 {
		return nil, errors.New("maptest: RoundRobin needs at least one node")
	}
	owners := make([]string, slots.Count)
	for s := range owners {
		owners[s] = nodes[s%len(nodes)].ID
	}
	return slotmap.New(slotmap.Snapshot{Version: version, ClusterID: "maptest", Nodes: nodes, Owners: owners})
}

// Move returns m at version with slot s owned by node to. The slot's
// replica set, if it had one, goes: a move commits its new owner alone, as
// the directory's does.
func Move(m *slotmap.Map, version uint64, s slots.Slot, to string) (*slotmap.Map, error) {
	owners := make([]string, slots.Count)
	for i := range owners {
		owners[i] = m.OwnerID(slots.MustNew(i))
	}
	owners[s.Int()] = to
	sets := slices.DeleteFunc(m.ReplicaSets(), func(rs slotmap.ReplicaSet) bool { return rs.Slot == s })
	return slotmap.New(slotmap.Snapshot{Version: version, ClusterID: m.ClusterID(), Nodes: m.Nodes(), Owners: owners, Replicas: sets})
}

// SetReplicas returns m at version with the given slots' replica sets
// replaced, as a replica step in the directory does: each set's primary
// (ISR[0]) becomes its slot's owner.
func SetReplicas(m *slotmap.Map, version uint64, sets ...slotmap.ReplicaSet) (*slotmap.Map, error) {
	owners := make([]string, slots.Count)
	for i := range owners {
		owners[i] = m.OwnerID(slots.MustNew(i))
	}
	all := m.ReplicaSets()
	for _, rs := range sets {
		if len(rs.ISR) == 0 {
			return nil, fmt.Errorf("maptest: slot %d: a replica set needs a primary", rs.Slot.Int())
		}
		owners[rs.Slot.Int()] = rs.Primary()
		all = slices.DeleteFunc(all, func(o slotmap.ReplicaSet) bool { return o.Slot == rs.Slot })
		all = append(all, rs)
	}
	return slotmap.New(slotmap.Snapshot{Version: version, ClusterID: m.ClusterID(), Nodes: m.Nodes(), Owners: owners, Replicas: all})
}
