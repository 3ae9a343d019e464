package directory

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/ringcompat"
	"github.com/slotd/slotd/slots"
)

// zonedNodes returns nodes n0, n1, ... with the zones given, in order
// ("" for none).
func zonedNodes(zones ...string) []Node {
	out := make([]Node, len(zones))
	for i, z := range zones {
		out[i] = Node{ID: fmt.Sprintf("n%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", 7000+i), Zone: z, Weight: 1}
	}
	return out
}

// setupRF bootstraps nodes at policy p.
func setupRF(t *testing.T, nodes []Node, p Replication) (*Directory, *Snapshot) {
	t.Helper()
	d := newDir(t, etcdtest.New(t), nil)
	if _, _, err := d.SetReplication(testCtx(t), ReplicationSpec{RF: &p.RF, MinISR: &p.MinISR, By: "test"}); err != nil {
		t.Fatalf("set replication %s: %v", p, err)
	}
	snap, err := d.Bootstrap(testCtx(t), nodes, 0, "test")
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	return d, snap
}

// checkZoneSpread fails unless every slot of snap has rf replicas, all in
// sync, in distinct zones, its owner first.
func checkZoneSpread(t *testing.T, snap *Snapshot, rf int) {
	t.Helper()
	for i, set := range snap.ReplicaSets() {
		if len(set.ISR) != rf || len(set.Learners) != 0 || set.Primary() != snap.Owner(slots.MustNew(i)) {
			t.Fatalf("slot %d: %+v, want %d in-sync replicas led by the owner %s", i, set, rf, snap.Owner(slots.MustNew(i)))
		}
		zones := map[string]bool{}
		for _, id := range set.ISR {
			n, _ := snap.Node(id)
			if zones[n.Zone] {
				t.Fatalf("slot %d: two replicas in zone %q: %v", i, n.Zone, set.ISR)
			}
			zones[n.Zone] = true
		}
	}
}

// TestBootstrapRF3: a cluster bootstrapped at rf 3 over three zones has
// the ring's replica walk (ringcompat.InitialReplicas) as its sets, every
// replica in sync, owners as primaries; the sets were written just before
// the owners, and a schema change or a watcher sees them at the bootstrap's
// version.
func TestBootstrapRF3(t *testing.T) {
	nodes := zonedNodes("a", "a", "b", "b", "c", "c")
	d, snap := setupRF(t, nodes, Replication{RF: 3, MinISR: 2})
	if snap.Replication != (Replication{RF: 3, MinISR: 2}) {
		t.Fatalf("policy %+v", snap.Replication)
	}
	checkZoneSpread(t, snap, 3)
	if h := snap.ReplicaHealth(); h != (ReplicaHealth{}) {
		t.Fatalf("health after the bootstrap: %+v", h)
	}
	ring := make([]ringcompat.Node, len(nodes))
	for i, n := range nodes {
		ring[i] = ringcompat.Node{ID: n.ID, Weight: n.Weight, Zone: n.Zone}
	}
	want, err := ringcompat.InitialReplicas(ring, ringcompat.DefaultVNodes, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, set := range snap.ReplicaSets() {
		if !slices.Equal(set.ISR, want[i]) || set.Epoch != 0 {
			t.Fatalf("slot %d: %+v, want %v at epoch 0", i, set, want[i])
		}
	}
	hist, err := d.History(testCtx(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range hist {
		kinds = append(kinds, c.Kind)
	}
	if !slices.Equal(kinds[len(kinds)-2:], []string{ChangeBootstrapReplicas, ChangeBootstrap}) {
		t.Fatalf("last history kinds %v, want the sets then the bootstrap", kinds)
	}
	// A watcher from scratch sees the same sets.
	ctx := testCtx(t)
	var seen *Snapshot
	err = d.Watch(ctx, 0, func(s *Snapshot) error { seen = s; return errStop })
	if !errors.Is(err, errStop) {
		t.Fatal(err)
	}
	if seen.Version != snap.Version || seen.StoredReplicaSets() != slots.Count {
		t.Fatalf("watcher: version %d with %d stored sets, want %d with %d", seen.Version, seen.StoredReplicaSets(), snap.Version, slots.Count)
	}
}

var errStop = errors.New("stop")

// TestBootstrapRF3Refused: a bootstrap at rf 3 over nodes in two zones, or
// with a node without a zone, is refused and creates no table.
func TestBootstrapRF3Refused(t *testing.T) {
	cases := []struct {
		name  string
		nodes []Node
		want  error
	}{
		{"two zones", zonedNodes("a", "b", "a", "b"), ErrRFAboveZones},
		{"a node without a zone", zonedNodes("a", "b", "c", ""), ErrNoZone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDir(t, etcdtest.New(t), nil)
			if _, _, err := d.SetReplication(testCtx(t), ReplicationSpec{RF: ptr(3), MinISR: ptr(2)}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Bootstrap(testCtx(t), tc.nodes, 0, "test"); !errors.Is(err, tc.want) {
				t.Fatalf("bootstrap: %v, want %v", err, tc.want)
			}
			if _, err := d.Snapshot(testCtx(t)); !errors.Is(err, ErrNotBootstrapped) {
				t.Fatalf("after a refused bootstrap: %v, want ErrNotBootstrapped", err)
			}
		})
	}
}

// TestSetReplicationRefusesBadInput: every refusal leaves the policy and
// the version as they were.
func TestSetReplicationRefusesBadInput(t *testing.T) {
	// Three zones with active nodes, a fourth node without a zone that is
	// draining (so rf 3 is allowed), and an rf-1 table.
	d := newDir(t, etcdtest.New(t), nil)
	ctx := testCtx(t)
	if _, err := d.Bootstrap(ctx, zonedNodes("a", "b", "c", ""), 0, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Drain(ctx, "n3", "", "test"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		p    Replication
		want error
	}{
		{"rf 0", Replication{RF: 0, MinISR: 1}, ErrInvalid},
		{"rf 6", Replication{RF: 6, MinISR: 1}, ErrInvalid},
		{"min_isr 0", Replication{RF: 1, MinISR: 0}, ErrInvalid},
		{"min_isr above rf", Replication{RF: 2, MinISR: 3}, ErrInvalid},
		{"rf above the zones", Replication{RF: 4, MinISR: 1}, ErrRFAboveZones},
		{"rf 3 needs replicas added", Replication{RF: 3, MinISR: 1}, ErrRFNeedsMoves},
	}
	v := mustVersion(t, d)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := d.SetReplication(ctx, ReplicationSpec{RF: &tc.p.RF, MinISR: &tc.p.MinISR, By: "test"}); !errors.Is(err, tc.want) {
				t.Fatalf("SetReplication(%s) = %v, want %v", tc.p, err, tc.want)
			}
			p, got, err := d.Replication(ctx)
			if err != nil || got != v || p != DefaultReplication() {
				t.Fatalf("after a refusal: %s at version %d (%v), want rf 1 min_isr 1 at %d", p, got, err, v)
			}
		})
	}
	if _, _, err := d.SetReplication(ctx, ReplicationSpec{Reason: "nothing"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a change naming neither rf nor min_isr: %v, want ErrInvalid", err)
	}
	// Undraining the node without a zone is refused at rf 3 too: set rf 3
	// before the bootstrap, on a second cluster.
	d2 := newDir(t, etcdtest.New(t), nil)
	if _, err := d2.RegisterNode(ctx, Node{ID: "bare", Addr: "127.0.0.1:7100", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := d2.Drain(ctx, "bare", "", "test"); err != nil {
		t.Fatal(err)
	}
	for _, n := range zonedNodes("a", "b", "c") {
		if _, err := d2.RegisterNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := d2.SetReplication(ctx, ReplicationSpec{RF: ptr(3), MinISR: ptr(2)}); err != nil {
		t.Fatalf("rf 3 with a draining node without a zone: %v", err)
	}
	v2 := mustVersion(t, d2)
	if _, err := d2.Undrain(ctx, "bare", "", "test"); !errors.Is(err, ErrNoZone) {
		t.Fatalf("undrain a node without a zone at rf 3: %v, want ErrNoZone", err)
	}
	if got := mustVersion(t, d2); got != v2 {
		t.Fatalf("a refused undrain changed the version %d -> %d", v2, got)
	}
}

// TestZonesAtRegistration: at rf > 1 a node without a zone cannot register
// (new, or again) nor be added; with a zone it can.
func TestZonesAtRegistration(t *testing.T) {
	d, _ := setupRF(t, zonedNodes("a", "b"), Replication{RF: 2, MinISR: 1})
	ctx := testCtx(t)
	v := mustVersion(t, d)
	bare := Node{ID: "x", Addr: "127.0.0.1:7100", Weight: 1}
	if _, err := d.RegisterNode(ctx, bare); !errors.Is(err, ErrNoZone) {
		t.Fatalf("register without a zone: %v, want ErrNoZone", err)
	}
	if _, _, err := d.AddNode(ctx, bare); !errors.Is(err, ErrNoZone) {
		t.Fatalf("add without a zone: %v, want ErrNoZone", err)
	}
	if got := mustVersion(t, d); got != v {
		t.Fatalf("refused registrations changed the version %d -> %d", v, got)
	}
	bare.Zone = "c"
	if _, err := d.RegisterNode(ctx, bare); err != nil {
		t.Fatalf("register with a zone: %v", err)
	}
	// min_isr follows the ISRs (2 each): 2 is allowed, rf stays.
	if _, _, err := d.SetReplication(ctx, ReplicationSpec{MinISR: ptr(2), Reason: "strict"}); err != nil {
		t.Fatalf("min_isr 2 at rf 2: %v", err)
	}
	snap, err := d.Snapshot(ctx)
	if err != nil || snap.Replication != (Replication{RF: 2, MinISR: 2}) {
		t.Fatalf("policy %+v, %v", snap.Replication, err)
	}
	hist, err := d.History(ctx, 1)
	if err != nil || hist[0].Kind != ChangeReplication || hist[0].Reason != "rf 2 min_isr 1 -> rf 2 min_isr 2: strict" {
		t.Fatalf("history of the change: %+v, %v", hist, err)
	}
}

func ptr(n int) *int { return &n }

// TestBootstrapWithPolicy: a bootstrap that names its policy stores it
// with the replica sets; one refused for its zones stores nothing, not even
// the policy.
func TestBootstrapWithPolicy(t *testing.T) {
	d := newDir(t, etcdtest.New(t), nil)
	ctx := testCtx(t)
	p := Replication{RF: 3, MinISR: 2}
	if _, err := d.BootstrapWith(ctx, zonedNodes("a", "b", "a"), 0, &p, "test"); !errors.Is(err, ErrRFAboveZones) {
		t.Fatalf("rf 3 over two zones: %v, want ErrRFAboveZones", err)
	}
	if got, v, err := d.Replication(ctx); err != nil || got != DefaultReplication() || v != 0 {
		t.Fatalf("after the refusal: %s at version %d (%v), want rf 1 at 0: nothing written", got, v, err)
	}
	snap, err := d.BootstrapWith(ctx, zonedNodes("a", "b", "c", "a"), 0, &p, "test")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Replication != p {
		t.Fatalf("policy %s, want %s", snap.Replication, p)
	}
	checkZoneSpread(t, snap, 3)
}
