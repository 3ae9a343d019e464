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
