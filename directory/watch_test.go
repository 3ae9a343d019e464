package directory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

// watcher runs d.Watch in a goroutine and records what it delivers.
type watcher struct {
	mu    sync.Mutex // guards snaps
	snaps []*Snapshot

	cancel context.CancelFunc
	done   chan error
}

func startWatcher(t *testing.T, d *Directory, from uint64) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	w := &watcher{cancel: cancel, done: make(chan error, 1)}
	go func() {
		w.done <- d.Watch(ctx, from, func(s *Snapshot) error {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.snaps = append(w.snaps, s)
			return nil
		})
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// stop cancels the watch and checks it ended with ctx's error.
func (w *watcher) stop(t *testing.T) {
	t.Helper()
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	if err := <-w.done; !errors.Is(err, context.Canceled) {
		t.Errorf("watch ended with %v, want context.Canceled", err)
	}
}

func (w *watcher) versions() []uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []uint64
	for _, s := range w.snaps {
		out = append(out, s.Version)
	}
	return out
}

func (w *watcher) last() *Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.snaps) == 0 {
		return nil
	}
	return w.snaps[len(w.snaps)-1]
}

// waitVersion waits until the watcher delivered version v.
func (w *watcher) waitVersion(t *testing.T, v uint64) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		if s := w.last(); s == nil || s.Version < v {
			return fmt.Errorf("watcher at %v, want %d", w.versions(), v)
		}
		return nil
	})
}

// churn makes n changes (begin and abort moves of one slot) and returns the
// last version.
func churn(t *testing.T, d *Directory, snap *Snapshot, n int) uint64 {
	t.Helper()
	v, err := churnErr(testCtx(t), d, snap, n)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func churnErr(ctx context.Context, d *Directory, snap *Snapshot, n int) (uint64, error) {
	set := snap.SlotsOf("n0")
	var s slots.Slot
	for s = range set.All() {
		break
	}
	var v uint64
	for i := range n {
		if i%2 == 0 {
			if _, err := d.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: "n1", MoveID: fmt.Sprintf("c%d", i)}); err != nil {
				return 0, err
			}
			continue
		}
		var err error
		if v, err = d.AbortMove(ctx, s, fmt.Sprintf("c%d", i-1), "churn", "t"); err != nil {
			return 0, err
		}
	}
	return v, nil
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

func TestWatchSeesEveryVersionInOrder(t *testing.T) {
	_, d, snap := setup(t, 3, nil)
	w := startWatcher(t, d, 0)
	w.waitVersion(t, snap.Version)
	last := churn(t, d, snap, 40)
	w.waitVersion(t, last)
	if got, want := w.versions(), seq(snap.Version, last); !slices.Equal(got, want) {
		t.Fatalf("watcher saw %v, want %v", got, want)
	}
	// Every delivered table equals a fresh read at its version.
	final, err := d.Snapshot(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.last(); !slices.Equal(got.Owners(), final.Owners()) || !slices.Equal(got.Moves, final.Moves) || !slices.Equal(got.Nodes, final.Nodes) {
		t.Fatal("watched table differs from a snapshot at the same version")
	}
}

func TestWatchFromVersionSkipsOlder(t *testing.T) {
	_, d, snap := setup(t, 2, nil)
	v := churn(t, d, snap, 4)
	w := startWatcher(t, d, v)
	// Nothing older than v+1 may come; the next change does.
	next, err := d.SetWeight(testCtx(t), "n1", 7, "t")
	if err != nil {
		t.Fatal(err)
	}
	w.waitVersion(t, next)
	if got := w.versions(); !slices.Equal(got, []uint64{next}) {
		t.Fatalf("watch from %d saw %v, want [%d]", v, got, next)
	}
}

func TestWatchWaitsForBootstrap(t *testing.T) {
	c := etcdtest.New(t)
	d := newDir(t, c, nil)
	w := startWatcher(t, d, 0)
	snap, err := d.Bootstrap(testCtx(t), testNodes(2), 0, "t")
	if err != nil {
		t.Fatal(err)
	}
	w.waitVersion(t, snap.Version)
	if got := w.versions(); !slices.Equal(got, []uint64{snap.Version}) {
		t.Fatalf("watcher saw %v, want only the bootstrapped version %d", got, snap.Version)
	}
}

func TestWatchBehindCompactionRecovers(t *testing.T) {
	c, d, snap := setup(t, 3, nil)
	// Between the watcher's read and its etcd watch: change the table and
	// compact past the read, so the watch cannot resume from there. The hook
	// runs on the watcher's goroutine, so it reports instead of failing.
	type hookResult struct {
		version uint64
		err     error
	}
	hooked := make(chan hookResult, 1)
	var once sync.Once
	d.afterWatchRead = func() {
		once.Do(func() {
			v, err := churnErr(context.Background(), d, snap, 10)
			if err == nil {
				_, err = c.Client().Compact(context.Background(), mustRevision(c.Client()), clientv3.WithCompactPhysical())
			}
			hooked <- hookResult{v, err}
		})
	}
	w := startWatcher(t, d, 0)
	h := <-hooked
	if h.err != nil {
		t.Fatalf("churn and compact: %v", h.err)
	}
	w.waitVersion(t, h.version)
	after := churn(t, d, snap, 4)
	w.waitVersion(t, after)
	got := w.versions()
	want := append([]uint64{snap.Version, h.version}, seq(h.version+1, after)...)
	if !slices.Equal(got, want) {
		t.Fatalf("watcher saw %v, want %v (fresh table after compaction, then every version)", got, want)
	}
}

func mustRevision(cli *clientv3.Client) int64 {
	resp, err := cli.Get(context.Background(), "revision-probe")
	if err != nil {
		return 0
	}
	return resp.Header.Revision
}

func TestWatchSurvivesEtcdRestart(t *testing.T) {
	c, d, snap := setup(t, 3, nil)
	w := startWatcher(t, d, 0)
	w.waitVersion(t, snap.Version)
	v1 := churn(t, d, snap, 4)
	w.waitVersion(t, v1)
	c.Restart(t)
	v2 := churn(t, d, snap, 4)
	w.waitVersion(t, v2)
	if got, want := w.versions(), seq(snap.Version, v2); !slices.Equal(got, want) {
		t.Fatalf("watcher saw %v, want %v", got, want)
	}
}

func TestWatchStopsOnCallbackError(t *testing.T) {
	_, d, _ := setup(t, 2, nil)
	boom := errors.New("boom")
	err := d.Watch(testCtx(t), 0, func(*Snapshot) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("watch returned %v, want the callback's error", err)
	}
}
