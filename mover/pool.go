package mover

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/slots"
)

// PoolConfig configures a StorePool.
type PoolConfig struct {
	// DialOptions for store connections; default plaintext. Give TLS
	// credentials (and a store-role certificate) in production.
	DialOptions []grpc.DialOption
	Logger      *slog.Logger
}

// exportWindow is the HTTP/2 receive window of one Store stream.
const exportWindow = 4 << 20

// StorePool holds one gRPC connection per store node address, for the
// mover's calls of the Store protocol. Safe for concurrent use.
type StorePool struct {
	opts []grpc.DialOption
	lg   *slog.Logger

	mu    sync.Mutex // guards conns
	conns map[string]*grpc.ClientConn
}

// NewStorePool returns an empty pool; connections are made on first use.
func NewStorePool(cfg PoolConfig) *StorePool {
	opts := cfg.DialOptions
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	// Receive windows for export batches (up to 2 MiB, four waiting in the
	// relay): gRPC's default starts at 64 KiB and grows with its
	// bandwidth-delay estimate, which takes the first moves over every new
	// connection.
	opts = append(slices.Clip(opts), grpc.WithInitialWindowSize(exportWindow), grpc.WithInitialConnWindowSize(2*exportWindow))
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &StorePool{opts: opts, lg: lg, conns: map[string]*grpc.ClientConn{}}
}

// client returns the Store client for addr. A transfer between two of its
// clients relays snapshot batches as bytes (see relay.go).
func (p *StorePool) client(addr string) (slotdv1.StoreClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cc, ok := p.conns[addr]; ok {
		return poolClient{slotdv1.NewStoreClient(cc), cc}, nil
	}
	cc, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, fmt.Errorf("dial store %s: %w", addr, err)
	}
	p.conns[addr] = cc
	return poolClient{slotdv1.NewStoreClient(cc), cc}, nil
}

// Close closes every connection.
func (p *StorePool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, cc := range p.conns {
		cc.Close()
		delete(p.conns, a)
	}
	return nil
}

// SlotStats asks every node that owns slots for its slot stats (in
// parallel, a few at a time). A node owning no slot is not asked. Each
// answer counts only for the slots the node owns (a left copy being
// dropped, or an import in progress, is not the slot's size), and an
// answer that makes no sense (a slot out of range or listed twice, more
// keys than bytes, a slot of more than 1 PiB, a rate that is not a
// number >= 0) is ignored whole, as a node that could not be asked. When
// any node's answer is missing, Stats.Bytes is nil and the error is a
// *sizesUnknownError naming every such node with its reason: a plan made
// with a node's sizes missing would think its slots free. Stats.Nodes
// still holds the nodes that answered.
func (p *StorePool) SlotStats(ctx context.Context, snap *directory.Snapshot) (*Stats, error) {
	out := &Stats{Bytes: make([]int64, slots.Count), Nodes: map[string]planner.NodeLoad{}}
	owners := snap.Owners()
	counts := snap.Counts()
	var mu sync.Mutex // guards out and unknown
	unknown := &sizesUnknownError{Reasons: map[string]string{}}
	var g errgroup.Group
	g.SetLimit(8)
	for _, n := range snap.Nodes {
		if n.Addr == "" || counts[n.ID] == 0 {
			continue
		}
		g.Go(func() error {
			c, err := p.client(n.Addr)
			var resp *slotdv1.SlotStatsResponse
			if err == nil {
				resp, err = c.SlotStats(ctx, &slotdv1.SlotStatsRequest{})
			}
			var nl planner.NodeLoad
			var rated bool
			var nonsense error
			if err == nil {
				nl, rated, nonsense = statsLoad(resp, n.ID, owners)
				err = nonsense
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				unknown.Nodes = append(unknown.Nodes, n.ID)
				if nonsense != nil {
					unknown.Reasons[n.ID] = nonsense.Error()
				}
				unknown.Err = cmp.Or(unknown.Err, fmt.Errorf("slot stats of %s: %w", n.ID, err))
				return nil
			}
			for _, sl := range nl.Slots {
				out.Bytes[sl.Slot] = int64(sl.Bytes)
			}
			out.Nodes[n.ID] = nl
			if rated {
				out.Rated = append(out.Rated, n.ID)
			}
			return nil
		})
	}
	_ = g.Wait()
	slices.Sort(out.Rated)
	if len(unknown.Nodes) > 0 {
		slices.Sort(unknown.Nodes)
		out.Bytes = nil
		return out, unknown
	}
	return out, nil
}

// maxSlotBytes is the largest slot size a store's answer may give: more is
// a store that lies (a petabyte in one of 16,384 slots).
const maxSlotBytes = 1 << 50

// statsLoad is node id's answer as a load: the slots it owns, with their
// keys, bytes and request rates. rated says the answer carried every
// slot's rates as a report sent now would (the long averages, reads
// included); from a node that does not send them, a slot's load is its
// writes per second alone. An answer that makes no sense is an error
// naming the first thing wrong.
func statsLoad(resp *slotdv1.SlotStatsResponse, id string, owners []string) (nl planner.NodeLoad, rated bool, err error) {
	var seen slots.Set
	rated = len(resp.GetSlots()) > 0
	for _, st := range resp.GetSlots() {
		s := st.GetSlot()
		r, w := 0.0, st.GetWritesPerSecond()
		if rt := st.GetRates(); rt != nil {
			r, w = rt.GetReads_10M(), rt.GetWrites_10M()
		} else {
			rated = false
		}
		switch {
		case s >= slots.Count:
			return nl, false, fmt.Errorf("its answer names slot %d, out of range 0-%d", s, slots.Count-1)
		case seen.Contains(slots.MustNew(int(s))):
			return nl, false, fmt.Errorf("its answer lists slot %d twice", s)
		case st.GetBytes() > maxSlotBytes:
			return nl, false, fmt.Errorf("its answer gives slot %d %d bytes, more than %d", s, st.GetBytes(), uint64(maxSlotBytes))
		case st.GetKeys() > st.GetBytes():
			return nl, false, fmt.Errorf("its answer gives slot %d %d keys in %d bytes", s, st.GetKeys(), st.GetBytes())
		case !isRate(w):
			return nl, false, fmt.Errorf("its answer gives slot %d %v writes per second", s, w)
		case !isRate(r):
			return nl, false, fmt.Errorf("its answer gives slot %d %v reads per second", s, r)
		}
		seen.Add(slots.MustNew(int(s)))
		if owners[s] != id {
			continue
		}
		nl.Slots = append(nl.Slots, planner.SlotLoad{Slot: uint16(s), Keys: float64(st.GetKeys()), Bytes: float64(st.GetBytes()), Reads: r, Writes: w})
	}
	return nl, rated, nil
}

// isRate says whether v is a request rate: a number >= 0.
func isRate(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// Stats is what SlotStats read: every slot's size as its owner gave it
// (nil unless every node owning slots answered), and per node that
// answered, its owned slots' keys, bytes and writes per second.
type Stats struct {
	Bytes []int64
	Nodes map[string]planner.NodeLoad
	// Rated lists, sorted, the nodes whose answer carried every slot's
	// request rates as a report sent now would: their answer is newer than
	// their last report in every figure, not only in size.
	Rated []string
}

// sizesOn returns the bytes node addr holds of each of ss (a slot it
// holds nothing of is absent), in one SlotStats call.
func (p *StorePool) sizesOn(ctx context.Context, addr string, ss []uint32) (map[uint32]int64, error) {
	c, err := p.client(addr)
	if err != nil {
		return nil, err
	}
	resp, err := c.SlotStats(ctx, &slotdv1.SlotStatsRequest{Slots: ss})
	if err != nil {
		return nil, fmt.Errorf("slot stats of %s: %w", addr, err)
	}
	out := make(map[uint32]int64, len(resp.Slots))
	for _, st := range resp.Slots {
		out[st.Slot] = int64(st.Bytes)
	}
	return out, nil
}

// sizesUnknownError names the nodes whose slot sizes could not be read.
type sizesUnknownError struct {
	Nodes []string // sorted
	// Reasons says, by node, why an answer was ignored (it made no
	// sense); a node that did not answer has none (Err says why).
	Reasons map[string]string
	Err     error // the first node's error
}

func (e *sizesUnknownError) Error() string {
	return fmt.Sprintf("slot sizes unknown for %s: %v", strings.Join(e.Nodes, ", "), e.Err)
}

func (e *sizesUnknownError) Unwrap() error { return e.Err }

var _ SizeSource = (*StorePool)(nil)
