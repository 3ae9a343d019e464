package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// memStore is the smallest correct Store: a map per slot, sorted on scan.
type memStore struct {
	mu   sync.Mutex // guards data
	data map[slots.Slot]map[string][]byte
}

var _ Store = (*memStore)(nil)

func newMemStore() *memStore { return &memStore{data: map[slots.Slot]map[string][]byte{}} }

func (m *memStore) Scan(ctx context.Context, s slots.Slot, cursor []byte, maxBytes int) ([]Entry, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.data[s] {
		if cursor == nil || k > string(cursor) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []Entry
	size := 0
	for i, k := range keys {
		if size >= maxBytes && i > 0 {
			return out, []byte(keys[i-1]), nil
		}
		out = append(out, Entry{Key: []byte(k), Value: bytes.Clone(m.data[s][k])})
		size += len(k) + len(m.data[s][k])
	}
	return out, nil, nil
}

func (m *memStore) Apply(ctx context.Context, s slots.Slot, batch []Mutation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data[s] == nil {
		m.data[s] = map[string][]byte{}
	}
	for _, mu := range batch {
		if mu.Delete {
			delete(m.data[s], string(mu.Key))
		} else {
			m.data[s][string(mu.Key)] = bytes.Clone(mu.Value)
		}
	}
	return nil
}

func (m *memStore) DeleteSlot(ctx context.Context, s slots.Slot, maxKeys int) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.data[s] {
		if maxKeys == 0 {
			return false, nil
		}
		delete(m.data[s], k)
		maxKeys--
	}
	return true, nil
}

func (m *memStore) SlotSize(ctx context.Context, s slots.Slot) (int64, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n, b int64
	for k, v := range m.data[s] {
		n++
		b += int64(len(k) + len(v))
	}
	return n, b, nil
}

func newTestNode(t *testing.T, st Store, m MapSource, dir string) *Node {
	t.Helper()
	n, err := New(Config{ID: "a", Store: st, Map: m, StateDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func put(key, val string) func() ([]Mutation, error) {
	return func() ([]Mutation, error) { return []Mutation{{Key: []byte(key), Value: []byte(val)}}, nil }
}

func TestWriteChecks(t *testing.T) {
	ctx := context.Background()
	m := new(StaticMap)
	st := newMemStore()
	n := newTestNode(t, st, m, t.TempDir())
	key := "{w}:1"
	s := slots.ForString(key)
	errPrepare := errors.New("prepare failed")

	if err := n.Write(ctx, []byte(key), put(key, "x")); !errors.Is(err, ErrNoMap) {
		t.Fatalf("before a map: %v, want ErrNoMap", err)
	}
	m.SetAll("a", "127.0.0.1:1")
	m.Set("b", "127.0.0.1:2", s)
	var re *RedirectError
	if err := n.Write(ctx, []byte(key), put(key, "x")); !errors.Is(err, ErrMoved) || !errors.As(err, &re) ||
		re.Owner != "b" || re.Addr != "127.0.0.1:2" || re.Version != m.Version() || re.Slot != s {
		t.Fatalf("not the owner: %v, want MOVED to b", err)
	}
	if err := n.CheckRead([]byte(key)); !errors.Is(err, ErrMoved) {
		t.Fatalf("read, not the owner: %v", err)
	}
	m.Set("a", "127.0.0.1:1", s)

	for _, tc := range []struct {
		name    string
		prepare func() ([]Mutation, error)
		want    error
	}{
		{"ok", put(key, "v1"), nil},
		{"prepare error passes through", func() ([]Mutation, error) { return nil, errPrepare }, errPrepare},
		{"key of another slot", func() ([]Mutation, error) {
			return []Mutation{{Key: []byte(key), Value: []byte("v2")}, {Key: []byte("{other}:1"), Value: []byte("x")}}, nil
		}, ErrWrongSlot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := n.Write(ctx, []byte(key), tc.prepare); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if got := string(st.data[s][key]); got != "v1" {
		t.Fatalf("store has %q; a refused write changed it", got)
	}

	if _, err := n.Fence(ctx, s, "mv", 9); err != nil {
		t.Fatal(err)
	}
	var fe *FencedError
	err := n.Write(ctx, []byte(key), put(key, "v3"))
	if !errors.Is(err, ErrFenced) || !errors.As(err, &fe) || fe.MoveID != "mv" || fe.Version != 9 || fe.RetryAfter <= 0 {
		t.Fatalf("fenced: %v, want FencedError for mv at 9", err)
	}
	if err := n.CheckRead([]byte(key)); err != nil {
		t.Fatalf("read of a fenced slot: %v", err)
	}
	if err := n.Unfence(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := n.Write(ctx, []byte(key), put(key, "v3")); err != nil {
		t.Fatalf("after unfence: %v", err)
	}
}

// TestCaptureSurvivesRestart: captured changes come back after a restart,
// a torn record at the log's end (a crash mid-append) is cut off, and new
// changes continue the sequence.
func TestCaptureSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	st := newMemStore()
	n := newTestNode(t, st, m, dir)
	key := "{c}:1"
	s := slots.ForString(key)
	base, err := n.StartCapture(ctx, s, "mv")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if err := n.Write(ctx, []byte(key), put(key, v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Write(ctx, []byte(key), func() ([]Mutation, error) { return []Mutation{{Key: []byte(key), Delete: true}}, nil }); err != nil {
		t.Fatal(err)
	}
	n.Close()
	f, err := os.OpenFile(capturePath(dir, s), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := appendRecord(nil, base+5, recPut, []byte(key), []byte("torn"))
	f.Write(torn[:len(torn)-3])
	f.Close()

	n2 := newTestNode(t, st, m, dir)
	if err := n2.Write(ctx, []byte(key), put(key, "e")); err != nil {
		t.Fatal(err)
	}
	b, err := n2.Changes(ctx, s, "mv", base, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, c := range b.Changes {
		if c.Seq != base+uint64(i)+1 {
			t.Fatalf("change %d has seq %d, want %d", i, c.Seq, base+uint64(i)+1)
		}
		if c.Delete {
			got = append(got, "-")
		} else {
			got = append(got, string(c.Value))
		}
	}
	if want := []string{"a", "b", "c", "-", "e"}; !slices.Equal(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	if _, err := n2.Changes(ctx, s, "other", base, 0, false); !errors.Is(err, ErrMoveMismatch) {
		t.Fatalf("another move's id: %v, want ErrMoveMismatch", err)
	}
	if _, err := n2.Changes(ctx, s, "mv", base-1, 0, false); !errors.Is(err, ErrCaptureLost) {
		t.Fatalf("changes before the snapshot: %v, want ErrCaptureLost", err)
	}
	// A new capture of the slot numbers above every earlier change.
	base2, err := n2.StartCapture(ctx, s, "mv2")
	if err != nil {
		t.Fatal(err)
	}
	if base2 <= base+5 {
		t.Fatalf("new capture starts at %d, at or below the old capture's %d", base2, base+5)
	}
}

// TestChangesWaitEndsAtFence: a follower waiting for changes wakes on the
// fence and learns the fence sequence.
func TestChangesWaitEndsAtFence(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	n := newTestNode(t, newMemStore(), m, t.TempDir())
	key := "{f}:1"
	s := slots.ForString(key)
	base, err := n.StartCapture(ctx, s, "mv")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Write(ctx, []byte(key), put(key, "a")); err != nil {
		t.Fatal(err)
	}
	got := make(chan ChangeBatch, 1)
	go func() {
		b, err := n.Changes(ctx, s, "mv", base+1, 0, true)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	fs, err := n.Fence(ctx, s, "mv", 1)
	if err != nil {
		t.Fatal(err)
	}
	b := <-got
	if fs != base+1 || b.FenceSeq != fs || len(b.Changes) != 0 {
		t.Fatalf("fence seq %d, batch %+v; want fence at %d and no changes", fs, b, base+1)
	}
}

func TestCorruptStateIsRefused(t *testing.T) {
	m := new(StaticMap)
	for _, tc := range []struct{ name, file, content string }{
		{"fence file", fenceFile, "12 x\n"},
		{"fence out of range", fenceFile, "16384 1 mv\n"},
		{"capture without header", "capture-5.log", "\x00\x00\x00\x0a\x00\x00\x00\x00garbage..."},
		{"import state", "import-5.json", "{"},
		{"drop file", dropFile, "5\n"},
		{"state log line", stateLogFile, "00000000 fence/5 1 mv\n"},
		{"state log fence value", stateLogFile, string(appendStateLine(nil, "fence/5", "x", false))},
		{"state log slot", stateLogFile, string(appendStateLine(nil, "fence/16384", "1 mv", false))},
		{"state log kind", stateLogFile, string(appendStateLine(nil, "other/5", "1", false))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(dir+"/"+tc.file, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := New(Config{ID: "a", Store: newMemStore(), Map: m, StateDir: dir}); err == nil {
				t.Fatal("New accepted corrupt state")
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{ID: "a", Store: newMemStore(), Map: new(StaticMap), StateDir: "x"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"no id", func(c *Config) { c.ID = "" }},
		{"no store", func(c *Config) { c.Store = nil }},
		{"no map", func(c *Config) { c.Map = nil }},
		{"no state dir", func(c *Config) { c.StateDir = "" }},
		{"negative rate", func(c *Config) { c.ExportBytesPerSecond = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			if c.Validate() == nil {
				t.Fatal("Validate accepted it")
			}
		})
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewPedanticRegistry()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	key := "{m}:1"
	s := slots.ForString(key)
	n, err := New(Config{ID: "a", Store: newMemStore(), Map: m, StateDir: t.TempDir(), Registerer: reg, ExportBytesPerSecond: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	_ = n.Write(ctx, []byte(key), put(key, "v"))
	m.Set("b", "127.0.0.1:2", s)
	_ = n.Write(ctx, []byte(key), put(key, "v"))
	m.Set("a", "127.0.0.1:1", s)
	if _, err := n.Fence(ctx, s, "mv", 1); err != nil {
		t.Fatal(err)
	}
	_ = n.Write(ctx, []byte(key), put(key, "v"))
	n.SetExportRate(5000)
	for _, tc := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"ok writes", n.m.writes.WithLabelValues("ok"), 1},
		{"redirected writes", n.m.writes.WithLabelValues("redirect"), 1},
		{"fenced writes", n.m.writes.WithLabelValues("unavailable"), 1},
		{"moved", n.m.redirects.WithLabelValues("moved"), 1},
		{"fenced slots", n.m.fenced, 1},
		{"throttle", n.m.throttle, 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := testutil.ToFloat64(tc.c); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("metric lint: %v %v", problems, err)
	}
}

// TestRunSamplesWriteRates: Run averages writes per second over the stats
// window, per slot.
func TestRunSamplesWriteRates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	n, err := New(Config{ID: "a", Store: newMemStore(), Map: m, StateDir: t.TempDir(), StatsWindow: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	defer func() { cancel(); <-done }()
	key := "{rate}:1"
	s := slots.ForString(key)
	writes := 0
	waitfor.Err(t, 20*time.Second, "a write rate", func() error {
		if err := n.Write(ctx, []byte(key), put(key, "v")); err != nil {
			t.Fatal(err)
		}
		writes++
		st, err := n.Stats(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if st.WritesPerSecond > 0 && st.Keys == 1 && st.Owned {
			return nil
		}
		return fmt.Errorf("no write rate after %d writes: %+v", writes, st)
	})
	if st, _ := n.Stats(ctx, slots.ForString("{idle}")); st.WritesPerSecond != 0 {
		t.Fatalf("idle slot has rate %v", st.WritesPerSecond)
	}
}

// TestDropResumesAfterRestart: a drop asked for before a restart finishes
// after it, throttled by the rate it was given, and lifts the slot's fence.
func TestDropResumesAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := newMemStore()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	keep, gone := slots.ForString("{keep}"), slots.ForString("{gone}")
	for i := range 50 {
		for _, tag := range []string{"keep", "gone"} {
			k := fmt.Sprintf("{%s}:%d", tag, i)
			if err := st.Apply(ctx, slots.ForString(k), []Mutation{{Key: []byte(k), Value: []byte("v")}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	n := newTestNode(t, st, m, dir)
	if _, err := n.Fence(ctx, gone, "mv", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Drop(ctx, gone, 0, 0, ""); !errors.Is(err, ErrOwned) {
		t.Fatalf("drop of an owned slot: %v, want ErrOwned", err)
	}
	m.Set("b", "127.0.0.1:2", gone)
	if _, err := n.Drop(ctx, gone, m.Version()+1, 0, ""); !errors.Is(err, ErrMapBehind) {
		t.Fatalf("drop ahead of the map: %v, want ErrMapBehind", err)
	}
	if started, err := n.Drop(ctx, gone, m.Version(), 1000, ""); err != nil || !started {
		t.Fatalf("drop: %v %v", started, err)
	}
	if started, err := n.Drop(ctx, gone, m.Version(), 1000, ""); err != nil || started {
		t.Fatalf("second drop: started %v, err %v; want a no-op", started, err)
	}
	n.Close() // before Run ever deleted anything

	n2 := newTestNode(t, st, m, dir)
	if !n2.Dropping(gone) || !n2.Fenced(gone) {
		t.Fatal("the drop or the fence was lost in the restart")
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n2.Run(rctx) }()
	defer func() { cancel(); <-done }()
	waitfor.True(t, 20*time.Second, "the drop to finish", func() bool { return !n2.Dropping(gone) })
	if k, _, _ := st.SlotSize(ctx, gone); k != 0 {
		t.Fatalf("%d keys left in the dropped slot", k)
	}
	if k, _, _ := st.SlotSize(ctx, keep); k != 50 {
		t.Fatalf("the other slot has %d keys, want 50", k)
	}
	if n2.Fenced(gone) {
		t.Fatal("fence not lifted after the drop")
	}
}

// TestEmptyCaptureLostInRestartIsReported: a capture that saw no write has
// no log file; after a restart it is gone, and the mover is told so
// (ErrCaptureLost makes it restart the move), never handed an empty,
// silently incomplete change stream.
func TestEmptyCaptureLostInRestartIsReported(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	st := newMemStore()
	n := newTestNode(t, st, m, dir)
	s := slots.ForString("{e}:1")
	base, err := n.StartCapture(ctx, s, "mv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(capturePath(dir, s)); !os.IsNotExist(err) {
		t.Fatalf("a capture without changes has a log file (%v)", err)
	}
	n.Close()
	n2 := newTestNode(t, st, m, dir)
	if err := n2.Write(ctx, []byte("{e}:1"), put("{e}:1", "after restart")); err != nil {
		t.Fatal(err)
	}
	if _, err := n2.Changes(ctx, s, "mv", base, 0, false); !errors.Is(err, ErrCaptureLost) {
		t.Fatalf("changes of a capture lost in a restart: %v, want ErrCaptureLost", err)
	}
}

// TestDropAfterReceivingAndGivingBack: a node that received a slot (an
// import) and later gives it away (an export) must drop its copy when asked
// by that later move. The finished import's state used to make the drop
// look like the late drop of an older move, so it was refused and the copy
// stayed on disk for good.
func TestDropAfterReceivingAndGivingBack(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	m := new(StaticMap)
	s := slots.ForString("{back}")
	m.SetAll("b", "127.0.0.1:2") // b owns everything; a receives s
	n := newTestNode(t, st, m, t.TempDir())
	key := []byte("{back}:1")
	if _, _, err := n.ImportSnapshot(ctx, s, "move-in", SnapshotBatch{BatchSeq: 1, Entries: []Entry{{Key: key, Value: []byte("v")}}, SnapshotSeq: 1, Done: true}); err != nil {
		t.Fatal(err)
	}
	m.Set("a", "127.0.0.1:1", s) // move-in committed
	if _, err := n.StartCapture(ctx, s, "move-out"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Fence(ctx, s, "move-out", m.Version()); err != nil {
		t.Fatal(err)
	}
	m.Set("b", "127.0.0.1:2", s) // move-out committed
	if started, err := n.Drop(ctx, s, m.Version(), 1000, "move-out"); err != nil || !started {
		t.Fatalf("drop asked by the move that took the slot away: started %v, err %v; want it started", started, err)
	}
}
