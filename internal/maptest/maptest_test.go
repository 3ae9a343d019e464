package maptest

import (
	"context"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/slots"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDirectory(t *testing.T) {
	m, err := RoundRobin(3, []slotmap.Node{{ID: "a", Addr: "h:1"}, {ID: "b", Addr: "h:2"}})
	if err != nil {
		t.Fatal(err)
	}
	st := NewState(m)
	srv, err := Start(st, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dir := slotdv1.NewDirectoryClient(conn)
	ctx := context.Background()

	tests := []struct {
		name     string
		req      *slotdv1.LookupRequest
		code     codes.Code
		wantSlot uint32
		owner    string
	}{
		{"key", &slotdv1.LookupRequest{Target: &slotdv1.LookupRequest_Key{Key: []byte("{user:42}:cart")}}, codes.OK, 4546, "a"},
		{"slot", &slotdv1.LookupRequest{Target: &slotdv1.LookupRequest_Slot{Slot: 16383}}, codes.OK, 16383, "b"},
		{"slot 99999", &slotdv1.LookupRequest{Target: &slotdv1.LookupRequest_Slot{Slot: 99999}}, codes.InvalidArgument, 0, ""},
		{"empty key", &slotdv1.LookupRequest{Target: &slotdv1.LookupRequest_Key{}}, codes.InvalidArgument, 0, ""},
		{"nothing", &slotdv1.LookupRequest{}, codes.InvalidArgument, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := dir.Lookup(ctx, tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("Lookup: %v, want %v", err, tc.code)
			}
			if err == nil && (resp.Slot != tc.wantSlot || resp.Owner != tc.owner || resp.Version != 3) {
				t.Fatalf("Lookup = %v", resp)
			}
		})
	}

	resp, err := dir.GetMap(ctx, &slotdv1.GetMapRequest{IfNewerThan: 3})
	if err != nil || !resp.Unchanged || resp.Map != nil {
		t.Fatalf("GetMap(if_newer_than=3) = %v, %v; want unchanged", resp, err)
	}
	next, err := Move(m, 4, slots.MustNew(0), "b")
	if err != nil {
		t.Fatal(err)
	}
	st.Set(next)
	resp, err = dir.GetMap(ctx, &slotdv1.GetMapRequest{IfNewerThan: 3})
	if err != nil || resp.Unchanged || resp.Map.GetVersion() != 4 {
		t.Fatalf("GetMap after a change = %v, %v", resp, err)
	}
	nodes, err := dir.ListNodes(ctx, &slotdv1.ListNodesRequest{})
	if err != nil || len(nodes.Nodes) != 2 || nodes.Nodes[0].Slots+nodes.Nodes[1].Slots != slots.Count || nodes.Nodes[1].Slots != slots.Count/2+1 {
		t.Fatalf("ListNodes = %v, %v", nodes, err)
	}
}
