package directory

import (
	"errors"
	"testing"

	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

func TestEtcdPrefixValidated(t *testing.T) {
	cases := []struct {
		prefix string
		ok     bool
	}{
		{"/slotd/", true},
		{"/clusters/eu-1/", true},
		{"/a.b_c-d/", true},
		{"", false}, // ValidatePrefix itself; Config maps "" to the default
		{"/", false},
		{"slotd/", false},
		{"/slotd", false},
		{"/a//b/", false},
		{"/with space/", false},
		{"/ünï/", false},
		{"/x\n/", false},
	}
	for _, tc := range cases {
		t.Run(tc.prefix, func(t *testing.T) {
			err := ValidatePrefix(tc.prefix)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidatePrefix(%q) = %v, want ok=%v", tc.prefix, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("ValidatePrefix(%q) = %v, want ErrInvalid", tc.prefix, err)
			}
		})
	}
	cli := etcdtest.New(t).Client()
	if _, err := New(Config{Client: cli, Prefix: "/a//b/"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("New with a bad prefix = %v, want ErrInvalid", err)
	}
}

// TestEtcdPrefixTwoClusters runs two directories on one etcd under two
// prefixes: each bootstraps, moves and watches its own table, neither sees
// the other's nodes, versions or history, and their cluster ids differ.
func TestEtcdPrefixTwoClusters(t *testing.T) {
	ctx := testCtx(t)
	c := etcdtest.New(t)
	a := newDir(t, c, func(cfg *Config) { cfg.Prefix = "/slotd/" })
	b := newDir(t, c, func(cfg *Config) { cfg.Prefix = "/clusters/b/" })
	if _, err := a.Bootstrap(ctx, testNodes(3), 0, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Snapshot(ctx); !errors.Is(err, ErrNotBootstrapped) {
		t.Fatalf("b before its bootstrap: %v, want ErrNotBootstrapped", err)
	}
	bn := []Node{{ID: "b1", Addr: "127.0.0.1:9001", Weight: 1}, {ID: "b2", Addr: "127.0.0.1:9002", Weight: 1}}
	if _, err := b.Bootstrap(ctx, bn, 0, "test"); err != nil {
		t.Fatal(err)
	}
	sa, err := a.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := slots.MustNew(ownerSlot(t, sa, "n0"))
	mv, err := a.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: "n1", Reason: "test", By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AdvanceMove(ctx, s, mv.MoveID, PhaseFenced); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CommitMove(ctx, s, mv.MoveID, "test"); err != nil {
		t.Fatal(err)
	}

	sa, err = a.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sa.Nodes) != 3 || len(sb.Nodes) != 2 || sb.Nodes[0].ID != "b1" {
		t.Fatalf("nodes a %v b %v", sa.Nodes, sb.Nodes)
	}
	if sa.Owner(s) != "n1" || sb.Owner(s) == "n1" {
		t.Fatalf("slot %d: a owner %s, b owner %s", s.Int(), sa.Owner(s), sb.Owner(s))
	}
	if sa.Version <= sb.Version {
		t.Fatalf("versions a %d b %d: a's changes counted in b", sa.Version, sb.Version)
	}
	hb, err := b.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range hb {
		if ch.Kind != ChangeBootstrap {
			t.Fatalf("b's history holds %+v", ch)
		}
	}

	idA, err := a.ClusterID(ctx, "etcd-1")
	if err != nil {
		t.Fatal(err)
	}
	idB, err := b.ClusterID(ctx, "etcd-1/clusters/b/")
	if err != nil {
		t.Fatal(err)
	}
	if idA == idB {
		t.Fatalf("both clusters are %q", idA)
	}
	// Once stored the id stays, whatever a later replica proposes.
	if again, err := b.ClusterID(ctx, "other"); err != nil || again != idB {
		t.Fatalf("b's id on a second call: %q %v, want %q", again, err, idB)
	}
	if _, err := a.ClusterID(ctx, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty proposal: %v", err)
	}
}
