package grpcapi

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/internal/etcdtest"
)

func u32(n uint32) *uint32 { return &n }

// zoned returns nodes n0, n1, ... with the zones given.
func zoned(zones ...string) []*slotdv1.Node {
	out := make([]*slotdv1.Node, len(zones))
	for i, z := range zones {
		out[i] = &slotdv1.Node{Id: fmt.Sprintf("n%d", i), Address: fmt.Sprintf("127.0.0.1:%d", 7100+i), Zone: z, Weight: 1}
	}
	return out
}

// TestReplicationRPCs: the policy is bootstrapped at rf 3 over three
// zones, shown with its zones and set health, and min_isr follows the
// ISRs; every bad value is refused with the code that says why, and
// changes nothing.
func TestReplicationRPCs(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	conn := dial(t, startServer(t, d, "127.0.0.1:0", nil).addr())
	ac := slotdv1.NewAdminClient(conn)
	ctx := testCtx(t)

	// A bootstrap at rf 3 over two zones is refused and stores nothing.
	_, err := ac.Bootstrap(ctx, &slotdv1.BootstrapRequest{Nodes: zoned("a", "b", "a"), Replication: &slotdv1.ReplicationPolicy{Rf: 3, MinIsr: 2}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("bootstrap at rf 3 over two zones: %v, want FailedPrecondition", err)
	}
	if g, err := ac.GetReplication(ctx, &slotdv1.GetReplicationRequest{}); err != nil || g.GetPolicy().GetRf() != 1 || g.GetBootstrapped() {
		t.Fatalf("after the refused bootstrap: %v, %v", g, err)
	}
	if _, err := ac.Bootstrap(ctx, &slotdv1.BootstrapRequest{Nodes: zoned("a", "b", "c", "c"), Replication: &slotdv1.ReplicationPolicy{Rf: 3, MinIsr: 2}}); err != nil {
		t.Fatal(err)
	}
	g, err := ac.GetReplication(ctx, &slotdv1.GetReplicationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if g.GetPolicy().GetRf() != 3 || g.GetPolicy().GetMinIsr() != 2 || !g.GetBootstrapped() || !slices.Equal(g.GetZones(), []string{"a", "b", "c"}) ||
		g.GetUnderReplicated() != 0 || g.GetBelowMinIsr() != 0 || g.GetWithLearners() != 0 || len(g.GetNodesWithoutZone()) != 0 {
		t.Fatalf("replication after the bootstrap: %v", g)
	}

	cases := []struct {
		name    string
		rf, min *uint32
		code    codes.Code
		want    string
	}{
		{"rf 0", u32(0), nil, codes.InvalidArgument, "rf 0 is not in 1-5"},
		{"rf 6", u32(6), u32(2), codes.InvalidArgument, "rf 6 is not in 1-5"},
		{"min_isr 0", nil, u32(0), codes.InvalidArgument, "min_isr 0"},
		{"min_isr above rf", nil, u32(4), codes.InvalidArgument, "min_isr 4"},
		{"rf above the zones", u32(4), nil, codes.FailedPrecondition, "rf 4 needs 4 zones"},
		{"rf needs replicas removed", u32(2), nil, codes.FailedPrecondition, "not run yet"},
		{"neither", nil, nil, codes.InvalidArgument, "give rf, min_isr or both"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ac.SetReplication(ctx, &slotdv1.SetReplicationRequest{Rf: tc.rf, MinIsr: tc.min, Operator: "t"})
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Fatalf("SetReplication: %v, want %s with %q", err, tc.code, tc.want)
			}
			after, err := ac.GetReplication(ctx, &slotdv1.GetReplicationRequest{})
			if err != nil || after.GetVersion() != g.GetVersion() || after.GetPolicy().GetRf() != 3 || after.GetPolicy().GetMinIsr() != 2 {
				t.Fatalf("a refusal changed the policy: %v, %v", after, err)
			}
		})
	}

	r, err := ac.SetReplication(ctx, &slotdv1.SetReplicationRequest{MinIsr: u32(3), Operator: "t", Reason: "strict"})
	if err != nil || !r.GetChanged() || r.GetPolicy().GetMinIsr() != 3 || r.GetVersion() != g.GetVersion()+1 {
		t.Fatalf("min_isr 3: %v, %v", r, err)
	}
	if r, err := ac.SetReplication(ctx, &slotdv1.SetReplicationRequest{Rf: u32(3), Operator: "t"}); err != nil || r.GetChanged() {
		t.Fatalf("rf 3 again: %v, %v; want no change", r, err)
	}

	// A store without a zone may not register at rf 3; the refusal names
	// the flag to set.
	_, err = ac.RegisterNode(ctx, &slotdv1.RegisterNodeRequest{Node: &slotdv1.Node{Id: "bare", Address: "127.0.0.1:7200"}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "--zone") {
		t.Fatalf("register without a zone at rf 3: %v, want FailedPrecondition naming --zone", err)
	}
	oc := slotdv1.NewOperatorClient(conn)
	_, err = oc.AddNode(ctx, &slotdv1.AddNodeRequest{Node: &slotdv1.Node{Id: "bare", Address: "127.0.0.1:7200"}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "zone=") {
		t.Fatalf("add without a zone at rf 3: %v, want FailedPrecondition naming zone=", err)
	}
	if _, err := ac.RegisterNode(ctx, &slotdv1.RegisterNodeRequest{Node: &slotdv1.Node{Id: "zoned", Address: "127.0.0.1:7201", Zone: "d"}}); err != nil {
		t.Fatalf("register with a zone: %v", err)
	}
}
