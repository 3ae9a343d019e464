package mover

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
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

// Client returns the Store client for addr. A transfer between two of its
// clients relays snapshot batches as bytes (see relay.go).
func (p *StorePool) Client(addr string) (slotdv1.StoreClient, error) {
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

// SlotSizes asks every node that owns slots for its slot sizes (in
// parallel, a few at a time) and returns the size of every slot. A node
// owning no slot is not asked. A node that does not answer makes the whole
// call fail, with a *SizesUnknownError naming every such node: a plan made
// with a node's sizes missing would think its slots free.
func (p *StorePool) SlotSizes(ctx context.Context, snap *directory.Snapshot) ([]int64, error) {
	sizes := make([]int64, slots.Count)
	owners := snap.Owners()
	counts := snap.Counts()
	var mu sync.Mutex // guards sizes and unknown
	unknown := &SizesUnknownError{}
	var g errgroup.Group
	g.SetLimit(8)
	for _, n := range snap.Nodes {
		if n.Addr == "" || counts[n.ID] == 0 {
			continue
		}
		g.Go(func() error {
			c, err := p.Client(n.Addr)
			var resp *slotdv1.SlotStatsResponse
			if err == nil {
				resp, err = c.SlotStats(ctx, &slotdv1.SlotStatsRequest{})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				unknown.Nodes = append(unknown.Nodes, n.ID)
				unknown.Err = cmp.Or(unknown.Err, fmt.Errorf("slot stats of %s: %w", n.ID, err))
				return nil
			}
			for _, st := range resp.Slots {
				// Only count what the node owns: a source's leftover copy
				// being dropped is not the slot's size.
				if int(st.Slot) < slots.Count && owners[st.Slot] == n.ID {
					sizes[st.Slot] = int64(st.Bytes)
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	if len(unknown.Nodes) > 0 {
		slices.Sort(unknown.Nodes)
		return nil, unknown
	}
	return sizes, nil
}

// SizesOn returns the bytes node addr holds of each of ss (a slot it
// holds nothing of is absent), in one SlotStats call.
func (p *StorePool) SizesOn(ctx context.Context, addr string, ss []uint32) (map[uint32]int64, error) {
	c, err := p.Client(addr)
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

// SizesUnknownError names the nodes whose slot sizes could not be read.
type SizesUnknownError struct {
	Nodes []string // sorted
	Err   error    // the first node's error
}

func (e *SizesUnknownError) Error() string {
	return fmt.Sprintf("slot sizes unknown for %s: %v", strings.Join(e.Nodes, ", "), e.Err)
}

func (e *SizesUnknownError) Unwrap() error { return e.Err }

var _ SizeSource = (*StorePool)(nil)
