package directory

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/internal/waitfor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testCtx returns a context bounded well below the test timeout, cancelled
// when the test ends.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fakeClock is an injected clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newDir returns a Directory on c with schema 1 in place.
func newDir(t testing.TB, c *etcdtest.Cluster, mod func(*Config)) *Directory {
	t.Helper()
	cfg := Config{Client: c.Client()}
	if mod != nil {
		mod(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatalf("new directory: %v", err)
	}
	ctx := testCtx(t)
	if err := d.InitLayout(ctx); err != nil {
		t.Fatalf("init layout: %v", err)
	}
	if err := d.SetSchema(ctx, 0, SchemaVersion); err != nil {
		t.Fatalf("set schema: %v", err)
	}
	return d
}

// testNodes returns n nodes n0..n{n-1}, weight 1, in two zones.
func testNodes(n int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{ID: fmt.Sprintf("n%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", 7000+i), Zone: fmt.Sprintf("z%d", i%2), Weight: 1}
	}
	return out
}

// setup starts etcd and returns a bootstrapped Directory over n nodes.
func setup(t testing.TB, n int, mod func(*Config)) (*etcdtest.Cluster, *Directory, *Snapshot) {
	t.Helper()
	c := etcdtest.New(t)
	d := newDir(t, c, mod)
	snap, err := d.Bootstrap(testCtx(t), testNodes(n), 0, "test")
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	return c, d, snap
}

// eventually polls cond until it returns nil, failing the test with cond's
// last error after timeout. The timeout only bounds a hang; it asserts no
// timing.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	waitfor.Err(t, timeout, "condition", cond)
}

func mustVersion(t testing.TB, d *Directory) uint64 {
	t.Helper()
	v, err := d.Version(testCtx(t))
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	return v
}

// ownerSlot returns some slot owned by id in snap.
func ownerSlot(t testing.TB, snap *Snapshot, id string) int {
	t.Helper()
	set := snap.SlotsOf(id)
	for s := range set.All() {
		return s.Int()
	}
	t.Fatalf("node %s owns no slot", id)
	return 0
}
