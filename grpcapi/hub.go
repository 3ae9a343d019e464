package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// DefaultKeep is how many recent versions the hub keeps deltas for: a
// watcher that fell further behind gets a full map.
const DefaultKeep = 64

// ErrClosed is returned to subscribers once the hub has stopped.
var ErrClosed = errors.New("service: map hub stopped")

// HubConfig configures a Hub.
type HubConfig struct {
	// Directory is followed with one Watch. Required.
	Directory *directory.Directory
	// ClusterID goes into every map, so clients never mix two clusters.
	ClusterID string
	// Keep is how many recent deltas are kept; default DefaultKeep.
	Keep   int
	Logger *slog.Logger
	// Registerer takes the hub's metrics (slotd_service_map_*); nil: none.
	Registerer prometheus.Registerer
}

// Validate reports a config that cannot work.
func (c HubConfig) Validate() error {
	if c.Directory == nil {
		return fmt.Errorf("%w: hub needs a directory", ErrInvalidConfig)
	}
	if c.Keep < 0 {
		return fmt.Errorf("%w: hub keep %d is negative", ErrInvalidConfig, c.Keep)
	}
	return nil
}

// version is one published map version, encoded once for every watcher.
type version struct {
	ver uint64
	// m and pb are set on the latest version only (older ones keep just
	// their delta): the map and its wire form shared by GetMap answers
	// (read-only). fullUpdate marshals the WatchMapResponse carrying pb
	// once, when a watcher first needs it: watchers that are up to date
	// take the delta, so most versions are never sent whole.
	m        *slotmap.Map
	pb       *slotdv1.SlotMap
	fullOnce sync.Once
	full     *encoded
	// delta turns the previous published version (from) into this one; nil
	// when there is none (the first version, or a change of bootstrap state).
	delta *encoded
	from  uint64
}

// fullUpdate returns the WatchMapResponse carrying the whole map, encoded
// once for every watcher that needs it. Only for a version with pb.
func (v *version) fullUpdate() *encoded {
	v.fullOnce.Do(func() { v.full = mustEncode(fullUpdate(v.pb)) })
	return v.full
}

// Hub follows the directory with a single etcd watch and fans every new
// map version out to any number of subscribers (WatchMap streams) without
// ever waiting for one: it only swaps the latest version and closes a
// channel; each subscriber's own goroutine catches up at its own pace, from
// the kept deltas or, when it fell further behind, from the full map. Safe
// for concurrent use.
type Hub struct {
	cfg HubConfig
	lg  *slog.Logger
	m   *hubMetrics

	mu      sync.Mutex // serializes the writers of st (publish, close)
	st      atomic.Pointer[hubState]
	runOnce sync.Once // Run runs once
}

// hubState is what subscribers read. It is never modified: publish and
// close store a new one, then close the old one's changed channel, so that
// the thousand subscribers one publish wakes read it at once instead of
// taking turns on a lock.
type hubState struct {
	recent  []*version    // newest last, at most cfg.Keep; recent[i].from == recent[i-1].ver when recent[i].delta != nil
	changed chan struct{} // closed once this state is replaced
	closed  bool          // set when Run returns: subscribers end
}

// NewHub returns a hub; Run makes it follow the directory.
func NewHub(cfg HubConfig) (*Hub, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Keep == 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newHubMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	h := &Hub{cfg: cfg, lg: cfg.Logger, m: m}
	h.st.Store(&hubState{changed: make(chan struct{})})
	return h, nil
}

// Run follows the directory until ctx is done, then ends every subscriber
// and returns ctx.Err(). It returns earlier only when the directory refuses
// to be followed (a schema newer than this binary knows). Run once.
func (h *Hub) Run(ctx context.Context) error {
	first := false
	h.runOnce.Do(func() { first = true })
	if !first {
		return fmt.Errorf("%w: hub is already running", ErrInvalidConfig)
	}
	defer h.close()
	err := h.cfg.Directory.Watch(ctx, 0, func(s *directory.Snapshot) error {
		m, err := mapOf(s, h.cfg.ClusterID)
		if err != nil {
			// A table the map cannot hold is a bug somewhere; skipping it
			// keeps the last good map, and the next version may be fine.
			h.lg.Error("directory snapshot does not make a map; skipped", "version", s.Version, "err", err)
			return nil
		}
		h.publish(m)
		return nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("service: follow the directory: %w", err)
}

func (h *Hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.st.Load(); !s.closed {
		h.st.Store(&hubState{recent: s.recent, changed: s.changed, closed: true})
		close(s.changed)
	}
}

// publish makes m the current version. Versions only go forward.
func (h *Hub) publish(m *slotmap.Map) {
	v := &version{ver: m.Version(), m: m}
	v.pb = m.Proto()

	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.st.Load()
	if s.closed {
		return
	}
	if n := len(s.recent); n > 0 {
		prev := s.recent[n-1].m
		if m.Version() <= prev.Version() {
			return
		}
		if !prev.Empty() && !m.Empty() {
			v.from = prev.Version()
			v.delta = mustEncode(&slotdv1.WatchMapResponse{Update: &slotdv1.WatchMapResponse_Delta{Delta: slotmap.Diff(prev, m)}})
		}
	}
	// Copy on write: subscribers read chains of the old slice without the
	// lock. The copy also lets dropped versions be freed, and replaces the
	// previous latest version by one holding only its delta.
	kept := s.recent[max(0, len(s.recent)+1-h.cfg.Keep):]
	next := make([]*version, len(kept), len(kept)+1)
	copy(next, kept)
	if n := len(next); n > 0 {
		last := next[n-1]
		next[n-1] = &version{ver: last.ver, delta: last.delta, from: last.from}
	}
	// The new state first: a subscriber woken by the close reads it.
	h.st.Store(&hubState{recent: append(next, v), changed: make(chan struct{})})
	close(s.changed)
	if h.m != nil {
		h.m.version.Set(float64(m.Version()))
		h.m.mapBytes.Set(float64(proto.Size(fullUpdate(v.pb))))
	}
}

// ClusterID returns the id that names the cluster in every map it serves.
func (h *Hub) ClusterID() string { return h.cfg.ClusterID }

// Current returns the latest map, or nil before the directory is
// bootstrapped (or before Run has read it).
func (h *Hub) Current() *slotmap.Map {
	if v := h.latest(); v != nil {
		return v.m
	}
	return nil
}

func (h *Hub) latest() *version {
	s := h.st.Load()
	if len(s.recent) == 0 {
		return nil
	}
	return s.recent[len(s.recent)-1]
}

// since returns what a subscriber holding version known needs: the latest
// version, the deltas from known to it (in order) when the hub still has
// them all, and the channel closed by the next publish. chain is nil with
// ok=false when the subscriber needs the full map; ok with an empty chain
// means it is up to date.
func (h *Hub) since(known uint64) (cur *version, chain []*version, ok bool, changed <-chan struct{}, closed bool) {
	s := h.st.Load()
	if s.closed {
		return nil, nil, false, nil, true
	}
	if len(s.recent) == 0 {
		return nil, nil, false, s.changed, false
	}
	cur = s.recent[len(s.recent)-1]
	if known == cur.ver {
		return cur, nil, true, s.changed, false
	}
	for i := len(s.recent) - 1; i >= 0; i-- {
		v := s.recent[i]
		if v.delta == nil {
			break
		}
		if v.from == known {
			return cur, s.recent[i:], true, s.changed, false
		}
	}
	return cur, nil, false, s.changed, false
}

// mapOf converts a directory snapshot into a map. Owners go by position:
// mapNodes keeps the snapshot's node order.
func mapOf(s *directory.Snapshot, clusterID string) (*slotmap.Map, error) {
	snap := slotmap.Snapshot{Version: s.Version, ClusterID: clusterID, Nodes: mapNodes(s.Nodes), OwnerIndexes: s.OwnerPositions()}
	for _, mv := range s.Moves {
		snap.Migrations = append(snap.Migrations, slotmap.Migration{
			Slot: mv.Slot, From: mv.From, To: mv.To, Phase: phaseProto(mv.Phase), MoveID: mv.MoveID,
		})
	}
	if s.StoredReplicaSets() > 0 {
		snap.EachReplicaSet = s.EachStoredSet
	}
	return slotmap.New(snap)
}

// unassignedMap is the map before bootstrap: nodes, no owners.
func unassignedMap(nodes []directory.Node, v uint64, clusterID string) (*slotmap.Map, error) {
	return slotmap.New(slotmap.Snapshot{Version: v, ClusterID: clusterID, Nodes: mapNodes(nodes)})
}

func mapNodes(ns []directory.Node) []slotmap.Node {
	out := make([]slotmap.Node, len(ns))
	for i, n := range ns {
		out[i] = slotmap.Node{ID: n.ID, Addr: n.Addr, Zone: n.Zone, Weight: uint32(n.Weight), State: stateProto(n.State)}
	}
	return out
}

// slotOf validates a slot number from a request.
func slotOf(n uint32) (slots.Slot, error) {
	if n >= slots.Count {
		return slots.Slot{}, fmt.Errorf("%w: slot %d is out of range 0-%d", directory.ErrInvalid, n, slots.Count-1)
	}
	return slots.MustNew(int(n)), nil
}

func mustEncode(m proto.Message) *encoded {
	b, err := proto.Marshal(m)
	if err != nil {
		// Only messages built here from validated maps get here.
		panic(fmt.Sprintf("service: marshal %T: %v", m, err))
	}
	return &encoded{b: b, msg: m, bs: mem.BufferSlice{mem.SliceBuffer(b)}}
}
