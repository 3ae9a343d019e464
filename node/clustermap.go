package node

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/slots"
)

// ClusterMap is the MapSource of a node in a slotd cluster: the client SDK's
// map cache, which its watch on slotd keeps fresh. Until Run has connected
// and received a first map, Owner reports no map, so the node answers
// UNAVAILABLE rather than guess what it owns. It is safe for concurrent use.
type ClusterMap struct {
	opts client.Options
	lg   *slog.Logger
	c    atomic.Pointer[client.Client]
}

var _ WholeMap = (*ClusterMap)(nil)

// NewClusterMap checks the SDK options; call Run to connect.
func NewClusterMap(opts client.Options) (*ClusterMap, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &ClusterMap{opts: opts, lg: lg}, nil
}

// Run connects the SDK, retrying while slotd is unreachable (the SDK backs
// off inside each attempt), and keeps it until ctx is done.
func (m *ClusterMap) Run(ctx context.Context) error {
	const attempt = 10 * time.Second
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		c, err := client.New(actx, m.opts)
		cancel()
		if err == nil {
			m.c.Store(c)
			m.lg.Info("slot map loaded", "version", c.Map().Version())
			<-ctx.Done()
			m.c.Store(nil)
			return c.Close()
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, client.ErrBadOptions) {
			return err
		}
		m.lg.Warn("no slot map from slotd yet; retrying", "err", err)
	}
}

// Owner implements MapSource.
func (m *ClusterMap) Owner(s slots.Slot) (Owner, bool) {
	c := m.c.Load()
	if c == nil {
		return Owner{}, false
	}
	return ClientMap{C: c}.Owner(s)
}

// Assigned reports whether the node holds a map from slotd in which slots
// have owners (the directory is bootstrapped): until then it can serve no
// key, and slotkv's health says NOT_SERVING.
func (m *ClusterMap) Assigned() bool {
	c := m.c.Load()
	if c == nil {
		return false
	}
	mp := c.Map()
	return mp != nil && !mp.Empty()
}

// ClientMap is the MapSource over an SDK client the caller already runs
// (ClusterMap makes and keeps its own).
type ClientMap struct{ C *client.Client }

var _ WholeMap = ClientMap{}

// Owner implements MapSource.
func (m ClientMap) Owner(s slots.Slot) (Owner, bool) {
	mp := m.C.Map()
	if mp == nil {
		return Owner{}, false
	}
	r := mp.RouteSlot(s)
	if !r.OK() {
		return Owner{}, false
	}
	return Owner{ID: r.Owner(), Addr: r.Addr(), Version: r.Version}, true
}

// Map implements WholeMap.
func (m *ClusterMap) Map() *slotmap.Map {
	c := m.c.Load()
	if c == nil {
		return nil
	}
	return c.Map()
}

// Map implements WholeMap.
func (m ClientMap) Map() *slotmap.Map { return m.C.Map() }
