package maptest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/slots"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// State is an in-memory directory: the current map and a broadcast of its
// changes. Safe for concurrent use.
type State struct {
	mu      sync.Mutex // guards cur, deltas and changed
	cur     *slotmap.Map
	changed chan struct{} // closed and replaced by every Set
	// deltas holds Diff(previous, next) for every Set, computed once and
	// shared by all watchers (as slotd should: a delta per watcher per
	// change is what makes propagation slow with many watchers).
	deltas []*slotdv1.MapDelta
}

// NewState returns a directory holding m.
func NewState(m *slotmap.Map) *State {
	return &State{cur: m, changed: make(chan struct{})}
}

// Set publishes m; watchers receive the delta from what they last saw.
func (s *State) Set(m *slotmap.Map) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Version() > s.cur.Version() {
		s.deltas = append(s.deltas, slotmap.Diff(s.cur, m))
	}
	s.cur = m
	close(s.changed)
	s.changed = make(chan struct{})
}

// Map returns the current map.
func (s *State) Map() *slotmap.Map {
	m, _ := s.snapshot()
	return m
}

func (s *State) snapshot() (*slotmap.Map, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.changed
}

// since returns the current map, the chain of deltas from version v to it
// (nil if there is no such chain), and the channel of the next change.
func (s *State) since(v uint64) (*slotmap.Map, []*slotdv1.MapDelta, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.deltas) - 1; i >= 0; i-- {
		if s.deltas[i].GetFromVersion() == v {
			return s.cur, s.deltas[i:len(s.deltas):len(s.deltas)], s.changed
		}
	}
	return s.cur, nil, s.changed
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
	s := &Server{state: st, lis: lis, srv: grpc.NewServer(), done: make(chan struct{})}
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
	m := s.state.Map()
	if req.GetIfNewerThan() > 0 && m.Version() <= req.GetIfNewerThan() {
		return &slotdv1.GetMapResponse{Unchanged: true, Version: m.Version()}, nil
	}
	return &slotdv1.GetMapResponse{Version: m.Version(), Map: m.Proto()}, nil
}

// WatchMap implements slotdv1.DirectoryServer: a full map, then one delta
// per change it sees (several Sets between two sends merge into one delta).
func (s *Server) WatchMap(_ *slotdv1.WatchMapRequest, stream grpc.ServerStreamingServer[slotdv1.WatchMapResponse]) error {
	s.watches.Add(1)
	ctx := stream.Context()
	last, changed := s.state.snapshot()
	if err := stream.Send(&slotdv1.WatchMapResponse{Update: &slotdv1.WatchMapResponse_Full{Full: last.Proto()}}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
		m, chain, next := s.state.since(last.Version())
		changed = next
		if m.Version() <= last.Version() {
			continue
		}
		if chain == nil { // no delta chain from last (Set went backwards): send in full
			u := &slotdv1.WatchMapResponse{Update: &slotdv1.WatchMapResponse_Full{Full: m.Proto()}}
			if err := stream.Send(u); err != nil {
				return err
			}
		}
		for _, d := range chain {
			u := &slotdv1.WatchMapResponse{Update: &slotdv1.WatchMapResponse_Delta{Delta: d}}
			if err := stream.Send(u); err != nil {
				return err
			}
		}
		last = m
	}
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

// Move returns m at version with slot s owned by node to.
func Move(m *slotmap.Map, version uint64, s slots.Slot, to string) (*slotmap.Map, error) {
	owners := make([]string, slots.Count)
	for i := range owners {
		owners[i] = m.OwnerID(slots.MustNew(i))
	}
	owners[s.Int()] = to
	return slotmap.New(slotmap.Snapshot{Version: version, ClusterID: m.ClusterID(), Nodes: m.Nodes(), Owners: owners})
}
