package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"unsafe"

	"google.golang.org/grpc"
	gbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/keepalive"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/internal/backoff"
	"github.com/slotd/slotd/internal/shortkey"
	"github.com/slotd/slotd/slots"
)

// Errors returned by the Client. Callers use errors.Is.
var (
	// ErrNoMap: the client has no map with owners yet (no slotd answered, or
	// the directory is not bootstrapped).
	ErrNoMap = errors.New("client: no slot map")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("client: closed")
	// ErrClusterMismatch: an endpoint served a map of another cluster.
	ErrClusterMismatch = errors.New("client: endpoint serves another cluster")
)

// errBehind: a watch stream started below the client's version.
var errBehind = errors.New("client: endpoint behind the client's map")

// Client keeps a slot map fresh and routes keys with it. Create it with New
// and release it with Close.
type Client struct {
	opts Options
	lg   *slog.Logger
	m    *metrics
	// retry (Do's waits after a stale redirect or a fence) and reconnect
	// (between broken watches) double from their first wait to their cap,
	// jittered down by up to half so that many clients do not retry in
	// step. Read-only after New.
	retry, reconnect backoff.Backoff

	conns []*grpc.ClientConn
	dirs  []slotdv1.DirectoryClient
	// ep is the index of the endpoint the watch uses now; fetches start there.
	ep atomic.Int32

	// cur is the map Route reads without locks, from any number of
	// goroutines: it has a cache line to itself, so that writes to the
	// fields around it (ep on failover, mu and lastErr on map updates and
	// watch failures) never invalidate the line every Route loads. It is
	// never nil: noMap until the first map arrives (load it with current
	// everywhere but Route's fast path).
	_   [64]byte
	cur atomic.Pointer[slotmap.Map]
	_   [64]byte
	// mu serializes map updates (so a check-then-store never moves the map
	// back) and guards subs and closed.
	mu     sync.Mutex
	subs   map[chan *slotmap.Map]struct{}
	closed bool

	// lastErr holds the last watch failure, for New's error message.
	lastErr atomic.Pointer[error]

	// first is closed when the first map arrives.
	first     chan struct{}
	firstOnce sync.Once
	// refresh asks the fetcher for a fresh map; capacity 1 coalesces requests.
	refresh chan struct{}

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New connects to the endpoints, waits until a map arrives (or ctx ends),
// and keeps the map fresh in the background until Close. ctx bounds only the
// wait for the first map.
func New(ctx context.Context, opts Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	c := &Client{
		opts:      opts,
		lg:        opts.Logger,
		m:         m,
		subs:      make(map[chan *slotmap.Map]struct{}),
		first:     make(chan struct{}),
		refresh:   make(chan struct{}, 1),
		retry:     backoff.Backoff{Initial: opts.RetryBackoff, Max: opts.MaxRetryBackoff, Jitter: 0.5},
		reconnect: backoff.Backoff{Initial: opts.ReconnectBackoff, Max: opts.MaxReconnectBackoff, Jitter: 0.5},
	}
	c.cur.Store(noMap)
	// gRPC's own reconnect backoff (1s base by default) would hold a client
	// back long after a restarted slotd is up again; use ours.
	//
	// Fixed windows turn off gRPC's bandwidth-delay probing, which otherwise
	// pings the server after data arrives: with many watchers that is a
	// syscall pair per client per map change for nothing (a delta is a few
	// hundred bytes; a full map fits in 1 MiB).
	//
	// The caller's options come last and win.
	dial := []grpc.DialOption{
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: gbackoff.Config{
				BaseDelay:  opts.ReconnectBackoff,
				Multiplier: 2,
				Jitter:     0.2,
				MaxDelay:   opts.MaxReconnectBackoff,
			},
			MinConnectTimeout: opts.FetchTimeout,
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: opts.KeepaliveTime, Timeout: opts.KeepaliveTimeout}),
		grpc.WithInitialWindowSize(1 << 20),
		grpc.WithInitialConnWindowSize(1 << 20),
	}
	dial = append(dial, opts.DialOptions...)
	for _, ep := range opts.Endpoints {
		conn, err := grpc.NewClient(ep, dial...)
		if err != nil {
			c.closeConns()
			m.unregister(opts.Registerer)
			return nil, fmt.Errorf("client: endpoint %s: %w", ep, err)
		}
		c.conns = append(c.conns, conn)
		c.dirs = append(c.dirs, slotdv1.NewDirectoryClient(conn))
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.watchLoop(runCtx) }()
	go func() { defer c.wg.Done(); c.fetchLoop(runCtx) }()

	select {
	case <-c.first:
		return c, nil
	case <-ctx.Done():
		c.Close()
		last := "none"
		if e := c.lastErr.Load(); e != nil {
			last = (*e).Error()
		}
		return nil, fmt.Errorf("%w: none of %v served a map before %v (last error: %s)", ErrNoMap, opts.Endpoints, context.Cause(ctx), last)
	}
}

// Close stops the background work, closes the connections and the
// subscription channels, and waits for everything it started. It is safe to
// call more than once.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for ch := range c.subs {
		close(ch)
		delete(c.subs, ch)
	}
	c.mu.Unlock()

	// Shutdown order: 1. cancel the loops, 2. wait for them (they use the
	// connections), 3. close the connections, 4. drop the metrics.
	c.cancel()
	c.wg.Wait()
	c.closeConns()
	c.m.unregister(c.opts.Registerer)
	return nil
}

func (c *Client) closeConns() {
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

// Map returns the current map, or nil before the first one. A Map is
// immutable; keep using the returned one as long as you like.
func (c *Client) Map() *slotmap.Map { return c.current() }

// noMap is what Client.cur holds before the first map: a map without
// owners, so that Route's one test (does the map have owners?) also covers
// "no map yet" and Route loads no nil pointer to test.
var noMap = new(slotmap.Map)

// current returns the current map, nil before the first one.
func (c *Client) current() *slotmap.Map {
	if m := c.cur.Load(); m != noMap {
		return m
	}
	return nil
}

// Route returns the slot of key and its owner from the local map: no RPC,
// no lock, no allocation, no write to shared memory (any number of
// goroutines may route with one Client at once without contending). It fails
// with ErrNoMap when the map has no owners.
func (c *Client) Route(key []byte) (slotmap.Route, error) {
	// slots.ForKey's fast path written out for a key of 8 to 16 bytes with
	// every byte below '{' (so no hash tag): its pieces inline, so Route is
	// the one call on the hot path, for every length the slot function's
	// quick path takes (shortkey.Words), not only 16 bytes. Shorter and
	// longer keys, and keys with a byte >= '{', take slots.ForKey; both
	// give the same slot (TestRouteSlotIsForKey, every length 0-72).
	//
	// 16 bytes has a case of its own (fixed loads, Sum16) and comes first:
	// one general case for 8-16 bytes (loads at n-8, then a branch to
	// Sum16) measured 2.9% slower at 16 bytes (BenchmarkRouteVsFloor
	// route/floor 1.470 -> 1.513, p=0.002), mostly because the compiler
	// laid out the 16-byte hash out of line; with this order and Tail1
	// unrolled (a loop is a "likely" block to the compiler) the 16-byte
	// path is straight-line code as before (1.435 -> 1.443, p=0.16).
	var s slots.Slot
	switch n := len(key); {
	case n == 16:
		// The tail below written out again (a jump to a shared tail was a
		// taken branch on this path), and each step on the line of the
		// branch that ends it: the compiler leaves a NOP for an inlined
		// call (an inline mark) unless some instruction of the function
		// has the call's line, and the branch is that instruction.
		if w0, wn := binary.LittleEndian.Uint64(key), binary.LittleEndian.Uint64(key[8:]); !shortkey.BelowBrace(w0, wn) {
			return c.routeSlow(key)
		} else if s, m := slots.FromHash(shortkey.Sum16(w0, wn)), c.cur.Load(); m.Empty() {
			return noRoute(m, s)
		} else {
			return m.RouteSlot(s), nil
		}
	case n >= 8 && n < 16:
		w0, wn := binary.LittleEndian.Uint64(key), binary.LittleEndian.Uint64(key[n-8:])
		if !shortkey.BelowBrace(w0, wn) {
			return c.routeSlow(key)
		}
		// shortkey.Sum in its pieces that inline (Sum does not).
		h4, t, r := shortkey.Tail4(shortkey.Start(w0, n), wn, n)
		s = slots.FromHash(shortkey.Finish(shortkey.Tail1(h4, t, r)))
	default:
		// Straight to the slot function, then on with the owner below:
		// through routeSlow, a call of its own, cost longer keys a call
		// and a second test of the map on their way.
		s = slots.ForKey(key)
	}
	m := c.cur.Load()
	// Asked here, whether the map has owners is the one branch on the
	// map's state (cur is never nil, see noMap): RouteSlot asks it again
	// and the compiler drops that test, and the route needs no test of its
	// own (r.OK()) after.
	if m.Empty() {
		return noRoute(m, s)
	}
	return m.RouteSlot(s), nil // RouteSlot inlines
}

// noRoute is Route's result when m, the current map, has no owners
// (noMap before the first map). Not inlined: a call marks the branch to
// it unlikely, so the compiler lays Route's path that routes out straight.
//
//go:noinline
func noRoute(m *slotmap.Map, s slots.Slot) (slotmap.Route, error) {
	if m == noMap {
		return slotmap.Route{}, ErrNoMap
	}
	return m.RouteSlot(s), ErrNoMap
}

// routeSlow is Route through slots.ForKey, for the keys the fast path does
// not take.
func (c *Client) routeSlow(key []byte) (slotmap.Route, error) {
	m := c.cur.Load()
	if m.Empty() {
		return noRoute(m, slots.ForKey(key))
	}
	return m.RouteSlot(slots.ForKey(key)), nil
}

// RouteString is Route for a string key. Route only reads its key, so it
// is handed the string's bytes as they are (no copy): one fast path serves
// both, and RouteString, a call to Route, inlines into its caller.
func (c *Client) RouteString(key string) (slotmap.Route, error) {
	return c.Route(unsafe.Slice(unsafe.StringData(key), len(key)))
}

// Replicas returns the in-sync replicas of slot s from the local map, those
// in Options.Zone first, then the others, each group with the primary first:
// the order in which to try them for a read that may be served by a replica
// (one that need not see the caller's own latest write; docs/replication.md,
// "Data path"). Writes go to the primary, Route's owner. Learners are never
// returned. At rf 1 it is the owner alone. It fails with ErrNoMap when the
// map has no owners.
func (c *Client) Replicas(s slots.Slot) ([]slotmap.Replica, error) {
	m := c.cur.Load()
	if m.Empty() {
		return nil, ErrNoMap
	}
	return m.Replicas(s, c.opts.Zone), nil
}
