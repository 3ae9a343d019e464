package node

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotd/slotd/slots"
)

// tickClock is a manual clock: After returns a channel that fires when the
// test advances the time past its deadline.
type tickClock struct {
	mu      sync.Mutex // guards everything below
	now     time.Time
	waiters []tickWaiter
	waiting chan struct{} // gets a value whenever After is called
}

type tickWaiter struct {
	at time.Time
	ch chan time.Time
}

func newTickClock() *tickClock {
	return &tickClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), waiting: make(chan struct{}, 64)}
}

func (c *tickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *tickClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, tickWaiter{c.now.Add(d), ch})
	c.waiting <- struct{}{}
	return ch
}

// advance moves the clock by d and fires every timer that is due.
func (c *tickClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want)) }

// TestLoadMeasuresOwnedSlots drives Run with a manual clock: a slot read
// at 100/s and written at 10/s for ten minutes shows those rates in both
// averages; a slot owned by another node, a refused read and an idle
// owned slot are not listed; sizes come from the store; after traffic
// stops the one-minute average falls first.
func TestLoadMeasuresOwnedSlots(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clock := newTickClock()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	hk := []byte("{cart7}:1")
	hot := slots.ForKey(hk)
	other := slots.MustNew((hot.Int() + 1) % slots.Count)
	m.Set("b", "127.0.0.1:2", other)
	st := newMemStore()
	n, err := New(Config{ID: "a", Store: st, Map: m, StateDir: t.TempDir(), Clock: clock, LoadInterval: 5 * time.Second, ReconcileInterval: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	done := make(chan error)
	go func() { done <- n.Run(ctx) }()
	defer func() { cancel(); <-done }()

	ok := keyIn(other)
	if err := st.Apply(ctx, hot, []Mutation{{Key: hk, Value: []byte("12345")}}); err != nil {
		t.Fatal(err)
	}
	// One interval: 500 reads, 50 writes of the hot slot; reads of the
	// other node's slot are refused and not counted.
	step := func() {
		<-clock.waiting // Run is waiting for the next fold
		for range 500 {
			if err := n.CheckRead(hk); err != nil {
				t.Fatal(err)
			}
		}
		for range 50 {
			if err := n.Write(ctx, hk, put(string(hk), "12345")); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.CheckRead(ok); err == nil {
			t.Fatal("read of another node's slot was served")
		}
		clock.advance(5 * time.Second)
	}
	for range 120 { // ten minutes
		step()
	}
	<-clock.waiting // the last fold is done
	l, err := n.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Slots) != 1 || l.Slots[0].Slot != hot {
		t.Fatalf("slots %+v, want only slot %d", l.Slots, hot.Int())
	}
	s := l.Slots[0]
	if !near(s.Reads1m, 100, 0.01) || !near(s.Reads10m, 100, 0.01) || !near(s.Writes1m, 10, 0.01) || !near(s.Writes10m, 10, 0.01) {
		t.Fatalf("rates %+v, want 100 reads/s and 10 writes/s", s)
	}
	if s.Keys != 1 || s.Bytes != int64(len(hk)+5) {
		t.Fatalf("size %d keys %d bytes, want 1 and %d", s.Keys, s.Bytes, len(hk)+5)
	}
	if s.Tag != "cart7" {
		t.Fatalf("tag %q, want cart7", s.Tag)
	}
	if len(l.HotKeys) != 1 || string(l.HotKeys[0].Key) != string(hk) || !near(l.HotKeys[0].Rate, 110, 0.1) {
		t.Fatalf("hot keys %+v, want %s at about 110/s", l.HotKeys, hk)
	}
	if l.Version != m.Version() {
		t.Fatalf("version %d, want %d", l.Version, m.Version())
	}

	// Two idle minutes: the short average is nearly gone, the long one is
	// still most of the rate.
	for range 24 {
		clock.advance(5 * time.Second)
		<-clock.waiting
	}
	l, err = n.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s = l.Slots[0]
	if s.Reads1m > 15 || s.Reads10m < 75 || s.Reads10m > 85 {
		t.Fatalf("after 2 idle minutes: reads %.1f (1m) %.1f (10m), want < 15 and about 82", s.Reads1m, s.Reads10m)
	}
}

// TestLoadYoungAverages: before a window has passed, an average is the
// mean since the start, not an exponential average started at zero.
func TestLoadYoungAverages(t *testing.T) {
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	n := newTestNode(t, newMemStore(), m, t.TempDir())
	k := []byte("k")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n.foldLoad(t0)
	for i := range 6 {
		for range 50 {
			if err := n.CheckRead(k); err != nil {
				t.Fatal(err)
			}
		}
		n.foldLoad(t0.Add(time.Duration(i+1) * 5 * time.Second))
	}
	i := slots.ForKey(k).Int()
	if r1, r10 := n.load.r1[i], n.load.r10[i]; !near(float64(r1), 10, 1e-4) || !near(float64(r10), 10, 1e-4) {
		t.Fatalf("after 30 s at 10/s: %v (1m) %v (10m), want 10", r1, r10)
	}
}

// TestLoadSizesFallBack: a store without SlotSizer is sized through
// Store.SlotSize for each owned slot only.
func TestLoadSizesFallBack(t *testing.T) {
	ctx := context.Background()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	s1, s2 := slots.MustNew(1), slots.MustNew(2)
	m.Set("b", "127.0.0.1:2", s2)
	st := newMemStore()
	n := newTestNode(t, st, m, t.TempDir())
	for _, s := range []slots.Slot{s1, s2} {
		k := keyIn(s)
		if err := st.Apply(ctx, s, []Mutation{{Key: k, Value: []byte("vv")}}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := n.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Slots) != 1 || l.Slots[0].Slot != s1 || l.Slots[0].Keys != 1 {
		t.Fatalf("slots %+v, want slot 1 with one key", l.Slots)
	}
	if _, err := newTestNode(t, st, new(StaticMap), t.TempDir()).Load(ctx); err != ErrNoMap {
		t.Fatalf("without a map: %v, want ErrNoMap", err)
	}
}

// TestHotKeysSketch feeds the sketch a Zipf-like stream over 10,000 keys:
// the true top keys are found, no estimate is below the true count, and
// no estimate is above it by more than its error bound.
func TestHotKeysSketch(t *testing.T) {
	var h hotKeys
	truth := map[string]float64{}
	keys := make([][]byte, 10000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key:%d", i)
	}
	// Key i gets about 1/(i+1)^1.1 of the stream, drawn deterministically.
	var x uint64 = 1
	weights := make([]float64, len(keys))
	sum := 0.0
	for i := range weights {
		weights[i] = 1 / math.Pow(float64(i+1), 1.1)
		sum += weights[i]
	}
	cdf := make([]float64, len(keys))
	acc := 0.0
	for i, w := range weights {
		acc += w / sum
		cdf[i] = acc
	}
	for range 200000 {
		x = x*6364136223846793005 + 1442695040888963407
		u := float64(x>>11) / (1 << 53)
		lo, hi := 0, len(cdf)-1
		for lo < hi {
			mid := (lo + hi) / 2
			if cdf[mid] < u {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		k := keys[lo]
		truth[string(k)]++
		h.add(slots.ForKey(k), k)
	}
	top := h.top(1)
	if len(top) < 10 {
		t.Fatalf("%d keys tracked, want at least 10", len(top))
	}
	for i := range 10 {
		if want := fmt.Sprintf("key:%d", i); string(top[i].Key) != want {
			t.Errorf("rank %d: %s (%.0f), want %s (%.0f)", i, top[i].Key, top[i].Rate, want, truth[want])
		}
	}
	for _, k := range top {
		tc := truth[string(k.Key)]
		if k.Rate < tc || k.Rate-k.Error > tc {
			t.Errorf("%s: estimate %.0f error %.0f, true %.0f", k.Key, k.Rate, k.Error, tc)
		}
	}
	// A key longer than the kept prefix is tracked by its whole hash.
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a'
	}
	var h2 hotKeys
	h2.add(slots.ForKey(long), long)
	long2 := append([]byte(nil), long...)
	long2[299] = 'b'
	h2.add(slots.ForKey(long2), long2)
	if tk := h2.top(1); len(tk) != 2 || !tk[0].Truncated || len(tk[0].Key) != MaxHotKeyBytes {
		t.Fatalf("long keys: %+v, want two truncated keys", tk)
	}
}

func TestHashTag(t *testing.T) {
	hk := func(ks ...string) []HotKey {
		var out []HotKey
		for _, k := range ks {
			out = append(out, HotKey{Key: []byte(k)})
		}
		return out
	}
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{[]string{"{u1}:a", "{u1}:b"}, "u1"},
		{[]string{"{u1}:a"}, "u1"},
		{[]string{"{u1}:a", "plain"}, ""},
		{[]string{"{u1}:a", "{u2}:b"}, ""},
		{[]string{"{}x"}, ""},
		{nil, ""},
	} {
		if got := hashTag(hk(tc.keys...)); got != tc.want {
			t.Errorf("hashTag(%q) = %q, want %q", tc.keys, got, tc.want)
		}
	}
}

// TestRequestPathAllocs: counting on the request path allocates nothing,
// the sketch included.
func TestRequestPathAllocs(t *testing.T) {
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	n := newTestNode(t, nopStore{}, m, t.TempDir())
	keys := make([][]byte, 256)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user:%d", i)
	}
	batch := []Mutation{{Key: keys[0], Value: []byte("v")}}
	prep := func() ([]Mutation, error) { return batch, nil }
	ctx := context.Background()
	i := 0
	if a := testing.AllocsPerRun(10000, func() {
		if err := n.CheckRead(keys[i&255]); err != nil {
			t.Fatal(err)
		}
		i++
	}); a != 0 {
		t.Errorf("CheckRead: %v allocs, want 0", a)
	}
	if a := testing.AllocsPerRun(10000, func() {
		if err := n.Write(ctx, keys[0], prep); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Write: %v allocs, want 0", a)
	}
}

// TestLoadSizesPaced: a size pass is reused until its pacing allows the
// next (20 times its cost, at least 2 s, at most 5 min), then renewed.
func TestLoadSizesPaced(t *testing.T) {
	ctx := context.Background()
	clock := newTickClock()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	st := newMemStore()
	n, err := New(Config{ID: "a", Store: st, Map: m, StateDir: t.TempDir(), Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	s := slots.MustNew(3)
	add := func(k string) {
		if err := st.Apply(ctx, s, []Mutation{{Key: []byte(k), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	keys := func() int64 {
		l, err := n.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Slots) == 0 {
			return 0
		}
		return l.Slots[0].Keys
	}
	add("a")
	if k := keys(); k != 1 {
		t.Fatalf("%d keys, want 1", k)
	}
	add("b")
	if k := keys(); k != 1 {
		t.Fatalf("at once: %d keys, want the last pass's 1", k)
	}
	clock.advance(sizeMinEvery - time.Millisecond)
	if k := keys(); k != 1 {
		t.Fatalf("before %v: %d keys, want the last pass's 1", sizeMinEvery, k)
	}
	clock.advance(sizeMaxEvery)
	if k := keys(); k != 2 {
		t.Fatalf("after %v: %d keys, want 2", sizeMaxEvery, k)
	}
}

// sizerStore is a memStore that is a SlotSizer and counts its SlotSize
// calls.
type sizerStore struct {
	*memStore
	slotSizeCalls atomic.Int64
}

func (s *sizerStore) SlotSize(ctx context.Context, sl slots.Slot) (int64, int64, error) {
	s.slotSizeCalls.Add(1)
	return s.memStore.SlotSize(ctx, sl)
}

func (s *sizerStore) SlotSizes(ctx context.Context, fn func(sl slots.Slot, keys, bytes int64)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range slots.Count {
		sl := slots.MustNew(i)
		var k, b int64
		for key, v := range s.data[sl] {
			k++
			b += int64(len(key) + len(v))
		}
		if k > 0 {
			fn(sl, k, b)
		}
	}
	return nil
}

// TestStatsAll: the stats of every slot (SlotStats with no slots) list the
// slots holding data, with their sizes, and a fenced slot without data, in
// slot order, and nothing else; a SlotSizer store gives them in its one
// pass, with no SlotSize call, and a plain store gives the same list.
func TestStatsAll(t *testing.T) {
	ctx := context.Background()
	data := map[slots.Slot]int{slots.MustNew(3): 2, slots.MustNew(900): 1, slots.MustNew(slots.Count - 1): 3}
	fenced := slots.MustNew(77)
	want := []SlotStats{
		{Slot: slots.MustNew(3), Keys: 2, Owned: true},
		{Slot: fenced, Owned: true, Fenced: true},
		{Slot: slots.MustNew(900), Keys: 1, Owned: true},
		{Slot: slots.MustNew(slots.Count - 1), Keys: 3, Owned: true},
	}
	for _, sizer := range []bool{false, true} {
		t.Run(fmt.Sprintf("sizer=%v", sizer), func(t *testing.T) {
			mem := newMemStore()
			var st Store = mem
			ss := &sizerStore{memStore: mem}
			if sizer {
				st = ss
			}
			m := new(StaticMap)
			m.SetAll("a", "127.0.0.1:1")
			n := newTestNode(t, st, m, t.TempDir())
			for s, keys := range data {
				for i := range keys {
					k := fmt.Appendf(nil, "{%s}:%d", keyIn(s), i)
					if err := mem.Apply(ctx, s, []Mutation{{Key: k, Value: []byte("vv")}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := n.Fence(ctx, fenced, "mv", 1); err != nil {
				t.Fatal(err)
			}
			ss.slotSizeCalls.Store(0)
			got, err := n.StatsAll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				want[i].Bytes = 0
				if k := want[i].Keys; k > 0 {
					// Each key is {tag}:i (one digit), its value 2 bytes.
					want[i].Bytes = k * int64(len(keyIn(want[i].Slot))+6)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("StatsAll =\n%+v\nwant\n%+v", got, want)
			}
			if c := ss.slotSizeCalls.Load(); sizer && c != 0 {
				t.Fatalf("a SlotSizer store was asked SlotSize %d times, want one pass", c)
			}
		})
	}
}
