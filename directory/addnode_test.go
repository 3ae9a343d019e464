package directory

import (
	"errors"
	"strings"
	"testing"
)

// TestAddNodeGuarded: AddNode never re-points a node, by id or by address,
// and says what each node owns; the same node again is a no-op; a new one
// is registered and audited as node-add by whoever the context names.
func TestAddNodeGuarded(t *testing.T) {
	_, d, _ := setup(t, 2, nil) // n0 127.0.0.1:7000, n1 127.0.0.1:7001
	ctx := testCtx(t)
	v := mustVersion(t, d)
	cases := []struct {
		name string
		n    Node
		want []string
	}{
		{"id at another address", Node{ID: "n0", Addr: "127.0.0.1:7100", Zone: "z0", Weight: 1},
			[]string{"node n0 is registered at 127.0.0.1:7000 and owns 8192 slots", "set-addr n0 127.0.0.1:7100"}},
		{"address of another node", Node{ID: "n9", Addr: "127.0.0.1:7001", Weight: 1},
			[]string{"address 127.0.0.1:7001 is node n1's, which owns 8192 slots"}},
		{"both", Node{ID: "n0", Addr: "127.0.0.1:7001", Zone: "z0", Weight: 1},
			[]string{"node n0 is registered at 127.0.0.1:7000", "address 127.0.0.1:7001 is node n1's"}},
		{"another weight", Node{ID: "n0", Addr: "127.0.0.1:7000", Zone: "z0", Weight: 3}, []string{"weight 1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := d.AddNode(ctx, tc.n)
			if !errors.Is(err, ErrPrecondition) {
				t.Fatalf("AddNode(%+v) = %v, want ErrPrecondition", tc.n, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q lacks %q", err, w)
				}
			}
			if got := mustVersion(t, d); got != v {
				t.Fatalf("a refused add changed the version %d -> %d", v, got)
			}
		})
	}
	if _, added, err := d.AddNode(ctx, Node{ID: "n1", Addr: "127.0.0.1:7001", Zone: "z1", Weight: 1}); err != nil || added {
		t.Fatalf("the same node again: added %v, %v", added, err)
	}
	n, added, err := d.AddNode(WithAudit(ctx, AuditEntry{Kind: AuditNode, Action: ActionNodeAdd, By: "alice", Reason: "new rack"}),
		Node{ID: "n2", Addr: "127.0.0.1:7002", Weight: 2})
	if err != nil || !added || n.ID != "n2" || n.State != NodeActive {
		t.Fatalf("add n2: %+v, %v, %v", n, added, err)
	}
	es, err := d.Audit(ctx, AuditQuery{Kind: AuditNode, Limit: 1})
	if err != nil || len(es) != 1 || es[0].Action != ActionNodeAdd || es[0].By != "alice" || es[0].Reason != "new rack" || es[0].Node != "n2" {
		t.Fatalf("audit of the add: %+v, %v", es, err)
	}
}
