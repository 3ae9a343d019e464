package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/ringcompat"
)

// mapServer serves one fixed slot map over the Directory API, so that the
// real SDK Client can start without etcd or slotd: the benchmark measures
// Client.Route, which never leaves the process once the map has arrived.
type mapServer struct {
	slotdv1.UnimplementedDirectoryServer
	m *slotmap.Map
}

func (s *mapServer) GetMap(_ context.Context, req *slotdv1.GetMapRequest) (*slotdv1.GetMapResponse, error) {
	if req.GetIfNewerThan() >= s.m.Version() {
		return &slotdv1.GetMapResponse{Unchanged: true, Version: s.m.Version()}, nil
	}
	return &slotdv1.GetMapResponse{Version: s.m.Version(), Map: s.m.Proto()}, nil
}

func (s *mapServer) WatchMap(req *slotdv1.WatchMapRequest, stream grpc.ServerStreamingServer[slotdv1.WatchMapResponse]) error {
	if req.GetKnownVersion() < s.m.Version() {
		if err := stream.Send(&slotdv1.WatchMapResponse{Update: &slotdv1.WatchMapResponse_Full{Full: s.m.Proto()}}); err != nil {
			return err
		}
	}
	<-stream.Context().Done()
	return nil
}

// sdkClient is a running SDK client following a fixed map.
type sdkClient struct {
	*client.Client
	srv *grpc.Server
}

// bootstrapMap is the slot map slotd would bootstrap for nodes
// (ringcompat.InitialAssignment, 128 vnodes).
func bootstrapMap(nodes []string) (*slotmap.Map, error) {
	rnodes := make([]ringcompat.Node, len(nodes))
	snodes := make([]slotmap.Node, len(nodes))
	for i, id := range nodes {
		rnodes[i] = ringcompat.Node{ID: id, Weight: 1}
		snodes[i] = slotmap.Node{ID: id, Addr: fmt.Sprintf("127.0.0.1:%d", 20000+i), Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE}
	}
	owners, err := ringcompat.InitialAssignment(rnodes, ringcompat.DefaultVNodes)
	if err != nil {
		return nil, err
	}
	return slotmap.New(slotmap.Snapshot{Version: 1, ClusterID: "bench", Nodes: snodes, Owners: owners})
}

// startSDK serves m on 127.0.0.1 and starts a Client that follows it.
func startSDK(m *slotmap.Map) (*sdkClient, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	slotdv1.RegisterDirectoryServer(srv, &mapServer{m: m})
	go func() { _ = srv.Serve(lis) }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Options{
		Endpoints:   []string{lis.Addr().String()},
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
	})
	if err != nil {
		srv.Stop()
		return nil, err
	}
	return &sdkClient{Client: c, srv: srv}, nil
}

// Close stops the client, then the server it watches.
func (s *sdkClient) Close() {
	_ = s.Client.Close()
	s.srv.Stop()
}
