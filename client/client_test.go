package client

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/internal/maptest"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The test cluster: three store nodes, slot s owned by nodes[s%3].
var testNodes = []slotmap.Node{
	{ID: "a", Addr: "10.0.0.1:7500", Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE},
	{ID: "b", Addr: "10.0.0.2:7500", Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE},
	{ID: "c", Addr: "10.0.0.3:7500", Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE},
}

func baseMap(t testing.TB, version uint64) *slotmap.Map {
	t.Helper()
	m, err := maptest.RoundRobin(version, testNodes)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func moved(t testing.TB, m *slotmap.Map, version uint64, s slots.Slot, to string) *slotmap.Map {
	t.Helper()
	next, err := maptest.Move(m, version, s, to)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

func startServer(t testing.TB, st *maptest.State, addr string) *maptest.Server {
	t.Helper()
	srv, err := maptest.Start(st, addr)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// newClient starts a client with fast backoffs and stops it at test end.
func newClient(t testing.TB, reg prometheus.Registerer, endpoints ...string) *Client {
	t.Helper()
	return newClientWith(t, func(o *Options) { o.Registerer = reg; o.Endpoints = endpoints })
}

func newClientWith(t testing.TB, edit func(*Options)) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := Options{
		RetryBackoff:        time.Millisecond,
		MaxRetryBackoff:     5 * time.Millisecond,
		ReconnectBackoff:    5 * time.Millisecond,
		MaxReconnectBackoff: 50 * time.Millisecond,
		MinFetchInterval:    time.Millisecond,
	}
	edit(&o)
	c, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually polls cond every few milliseconds for up to 10 seconds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, 10*time.Second, what, cond)
}

func versionIs(c *Client, v uint64) func() bool {
	return func() bool { m := c.Map(); return m != nil && m.Version() == v }
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		ok   bool
	}{
		{"one endpoint", Options{Endpoints: []string{"127.0.0.1:7400"}}, true},
		{"no endpoints", Options{}, false},
		{"empty endpoint", Options{Endpoints: []string{""}}, false},
		{"negative attempts", Options{Endpoints: []string{"x:1"}, MaxAttempts: -1}, false},
		{"negative backoff", Options{Endpoints: []string{"x:1"}, RetryBackoff: -1}, false},
		{"base over cap", Options{Endpoints: []string{"x:1"}, ReconnectBackoff: time.Second, MaxReconnectBackoff: time.Millisecond}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrBadOptions) {
				t.Fatalf("error %v is not ErrBadOptions", err)
			}
		})
	}
}

func TestNewWithoutServerFails(t *testing.T) {
	// A port that was just free: nothing listens there.
	srv := startServer(t, maptest.NewState(baseMap(t, 1)), "127.0.0.1:0")
	addr := srv.Addr()
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	c, err := New(ctx, Options{Endpoints: []string{addr}, ReconnectBackoff: time.Millisecond})
	if !errors.Is(err, ErrNoMap) || c != nil {
		t.Fatalf("New = %v, %v; want ErrNoMap", c, err)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "last error: rpc error") {
		t.Fatalf("the error does not say which endpoint failed and how: %v", err)
	}
}

func TestRouteAndWatch(t *testing.T) {
	st := maptest.NewState(baseMap(t, 10))
	srv := startServer(t, st, "127.0.0.1:0")
	defer srv.Stop()
	reg := prometheus.NewRegistry()
	c := newClient(t, reg, srv.Addr())

	key := []byte("{user:42}:cart")
	s := slots.ForKey(key)
	r, err := c.Route(key)
	if err != nil || r.Slot != s || r.Version != 10 || r.Owner() != testNodes[s.Int()%3].ID || r.Addr() != testNodes[s.Int()%3].Addr {
		t.Fatalf("Route = %+v (%s %s), %v", r, r.Owner(), r.Addr(), err)
	}
	if rs, _ := c.RouteString("{user:42}:cart"); rs != r {
		t.Fatal("RouteString differs from Route")
	}

	maps, cancel := c.Subscribe()
	defer cancel()
	if m := <-maps; m.Version() != 10 {
		t.Fatalf("subscription starts at %d, want 10", m.Version())
	}

	to := testNodes[(s.Int()+1)%3]
	st.Set(moved(t, st.Map(), 11, s, to.ID))
	eventually(t, "version 11", versionIs(c, 11))
	if r, _ := c.Route(key); r.Owner() != to.ID || r.Addr() != to.Addr {
		t.Fatalf("after the move Route = %s@%s, want %s@%s", r.Owner(), r.Addr(), to.ID, to.Addr)
	}
	if m := <-maps; m.Version() != 11 {
		t.Fatalf("subscription got %d, want 11", m.Version())
	}
	if got := testutil.ToFloat64(c.m.version); got != 11 {
		t.Fatalf("slotd_client_map_version = %v, want 11", got)
	}
	if got := testutil.ToFloat64(c.m.refreshes.WithLabelValues(sourceWatchDelta.String())); got != 1 {
		t.Fatalf("watch_delta refreshes = %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "slotd_client_map_version", "slotd_client_redirects_total", "slotd_client_map_refreshes_total"); err != nil || n == 0 {
		t.Fatalf("metrics not registered: %d, %v", n, err)
	}
}

func TestRouteDoesNotAllocate(t *testing.T) {
	st := maptest.NewState(baseMap(t, 1))
	srv := startServer(t, st, "127.0.0.1:0")
	defer srv.Stop()
	c := newClient(t, nil, srv.Addr())
	key := []byte("0123456789abcdef")
	if n := testing.AllocsPerRun(1000, func() { _, _ = c.Route(key) }); n != 0 {
		t.Fatalf("Route allocates %v times per call", n)
	}
	if n := testing.AllocsPerRun(1000, func() { _, _ = c.RouteString("0123456789abcdef") }); n != 0 {
		t.Fatalf("RouteString allocates %v times per call", n)
	}
}

// TestRouteSlotIsForKey: Route computes the slot itself for 16-byte keys
// (shortkey's pieces inlined) and through slots.ForKey otherwise; both must
// be the slot function. Keys: the shared vectors; every length from 0 to 24
// with fill bytes on either side of '{' and a '{' or '}' at every position;
// and random keys of those lengths (fixed seed), printable or any byte.
func TestRouteSlotIsForKey(t *testing.T) {
	m := baseMap(t, 1)
	srv := startServer(t, maptest.NewState(m), "127.0.0.1:0")
	defer srv.Stop()
	c := newClient(t, nil, srv.Addr())

	var keys [][]byte
	f, err := os.ReadFile(filepath.Join("..", "slots", "testdata", "slots.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(f)) {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		k, err := hex.DecodeString(strings.Split(line, "\t")[0])
		if err != nil {
			t.Fatalf("vector %q: %v", line, err)
		}
		keys = append(keys, k)
	}
	for n := 0; n <= 72; n++ { // well past the inline path's 16 bytes
		for _, fill := range []byte{'a', 0x7a, 0x7b, 0x7c, 0x7f, 0x80, 0xfb, 0xff, 0x00} {
			key := bytes.Repeat([]byte{fill}, n)
			keys = append(keys, key)
			for i := range key {
				for _, b := range []byte{'{', '}'} {
					k := bytes.Clone(key)
					k[i] = b
					if i+2 < n {
						k[i+2] = '}'
					}
					keys = append(keys, k)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(19, 6))
	for range 20000 {
		k := make([]byte, rng.IntN(73))
		for i := range k {
			if k[i] = byte(' ' + rng.IntN(95)); len(k)%3 == 0 {
				k[i] = byte(rng.Uint32())
			}
		}
		keys = append(keys, k)
	}
	for _, key := range keys {
		want := slots.ForKey(key)
		r, err := c.Route(key)
		if err != nil || r.Slot != want || r.Owner() != m.OwnerID(want) {
			t.Fatalf("Route(%q) = slot %d owner %q, %v; want slot %d owner %q", key, r.Slot.Int(), r.Owner(), err, want.Int(), m.OwnerID(want))
		}
		if rs, err := c.RouteString(string(key)); err != nil || rs != r {
			t.Fatalf("RouteString(%q) = %+v, %v; want %+v", key, rs, err, r)
		}
	}
}

func TestUnbootstrappedDirectory(t *testing.T) {
	empty, err := slotmap.New(slotmap.Snapshot{Version: 1, ClusterID: "maptest", Nodes: testNodes})
	if err != nil {
		t.Fatal(err)
	}
	st := maptest.NewState(empty)
	srv := startServer(t, st, "127.0.0.1:0")
	defer srv.Stop()
	c := newClient(t, nil, srv.Addr())
	// Every path of Route and RouteString (inline 16 and 8-15 bytes, and
	// slots.ForKey) says ErrNoMap with the key's slot and the map's
	// version, and names no owner.
	for _, key := range []string{"k", "user:0123", "user:0123456789a", "user:0123456789abcdef", "{user:1}:cart"} {
		want := slotmap.Route{Slot: slots.ForString(key), Version: 1}
		r, err := c.Route([]byte(key))
		if !errors.Is(err, ErrNoMap) || r != want || r.OK() {
			t.Fatalf("Route(%q) before bootstrap = %+v, %v; want %+v, ErrNoMap", key, r, err, want)
		}
		if r, err := c.RouteString(key); !errors.Is(err, ErrNoMap) || r != want {
			t.Fatalf("RouteString(%q) before bootstrap = %+v, %v; want %+v, ErrNoMap", key, r, err, want)
		}
	}
	err = c.Do(context.Background(), []byte("k"), func(context.Context, string, bool) error {
		t.Fatal("Do sent a request without a map")
		return nil
	})
	if !errors.Is(err, ErrNoMap) {
		t.Fatalf("Do before bootstrap: %v, want ErrNoMap", err)
	}
	st.Set(baseMap(t, 2))
	eventually(t, "bootstrap", func() bool { _, err := c.Route([]byte("k")); return err == nil })
}

// Before the first map the Client holds noMap: Map says nil, and Route
// fails with the zero route, as it did when the map pointer was nil.
func TestRouteBeforeFirstMap(t *testing.T) {
	c := &Client{}
	c.cur.Store(noMap)
	if m := c.Map(); m != nil {
		t.Fatalf("Map() = %v before the first map, want nil", m)
	}
	for _, key := range []string{"k", "user:0123", "user:0123456789a", "user:0123456789abcdef"} {
		if r, err := c.Route([]byte(key)); !errors.Is(err, ErrNoMap) || r != (slotmap.Route{}) {
			t.Fatalf("Route(%q) = %+v, %v; want the zero route, ErrNoMap", key, r, err)
		}
		if r, err := c.RouteString(key); !errors.Is(err, ErrNoMap) || r != (slotmap.Route{}) {
			t.Fatalf("RouteString(%q) = %+v, %v; want the zero route, ErrNoMap", key, r, err)
		}
	}
}
