package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slots"
)

// emptyStore is a store node's data as the simulation needs it: it holds
// nothing (moves are directory commits, nothing is copied, reconciliation
// finds nothing to clean up), yet sizes every slot it is asked about as
// slotBytes in slotKeys keys, so that each load report lists every slot
// its node owns, as a loaded store's would.
type emptyStore struct{}

const (
	slotKeys  = 4096
	slotBytes = 4 << 20
)

var (
	_ node.Store      = emptyStore{}
	_ node.SlotLister = emptyStore{}
)

func (emptyStore) Scan(context.Context, slots.Slot, []byte, int) ([]node.Entry, []byte, error) {
	return nil, nil, nil
}
func (emptyStore) Apply(context.Context, slots.Slot, []node.Mutation) error { return nil }
func (emptyStore) DeleteSlot(context.Context, slots.Slot, int) (bool, error) {
	return true, nil
}
func (emptyStore) SlotSize(context.Context, slots.Slot) (int64, int64, error) {
	return slotKeys, slotBytes, nil
}
func (emptyStore) SlotsWithData(context.Context) (slots.Set, error) { return slots.Set{}, nil }

// storeNode is one simulated store node, wired as slotkv wires the node
// library: the map from the SDK's watch (node.ClusterMap), the lease the
// Registrar renews with heartbeats, the Reporter's load reports, and the
// store service on a gRPC listener of its own, whose address it registers.
type storeNode struct {
	id, zone string
	lis      net.Listener
	gs       *grpc.Server
	n        *node.Node
	maps     *node.ClusterMap
	reg      *node.Registrar
	rep      *node.Reporter
	conns    []*grpc.ClientConn
}

// newStoreNode builds node id of zone over slotd at addr, its state in
// dir. Close releases what it holds.
func newStoreNode(id, zone, addr, dir string) (_ *storeNode, err error) {
	sn := &storeNode{id: id, zone: zone}
	defer func() {
		if err != nil {
			sn.close()
		}
	}()
	quiet := slog.New(slog.DiscardHandler)
	// Three channels to slotd, as slotkv opens them: registration and
	// heartbeats, load reports, and the SDK's map watch (its own).
	for range 2 {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("node %s: dial slotd: %w", id, err)
		}
		sn.conns = append(sn.conns, c)
	}
	if sn.maps, err = node.NewClusterMap(client.Options{Endpoints: []string{addr}, Logger: quiet}); err != nil {
		return nil, fmt.Errorf("node %s: %w", id, err)
	}
	lease := node.NewLease(id, nil, quiet)
	if sn.n, err = node.New(node.Config{
		ID: id, Store: emptyStore{}, Map: sn.maps, StateDir: filepath.Join(dir, id), NoSync: true,
		Lease: lease, Logger: quiet,
	}); err != nil {
		return nil, fmt.Errorf("node %s: %w", id, err)
	}
	if sn.lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("node %s: listen: %w", id, err)
	}
	sn.gs = grpc.NewServer()
	sn.n.RegisterStore(sn.gs)
	if sn.reg, err = node.NewRegistrar(node.RegistrarConfig{
		Admin:        slotdv1.NewAdminClient(sn.conns[0]),
		Node:         &slotdv1.Node{Id: id, Address: sn.lis.Addr().String(), Zone: zone},
		Logger:       quiet,
		OrphanBytes:  sn.n.OrphanBytes,
		OnRegistered: sn.n.RequireMapVersion,
		Lease:        lease,
	}); err != nil {
		return nil, fmt.Errorf("node %s: %w", id, err)
	}
	if sn.rep, err = node.NewReporter(node.ReporterConfig{
		Node: sn.n, Replicas: []slotdv1.LoadClient{slotdv1.NewLoadClient(sn.conns[1])}, Logger: quiet,
	}); err != nil {
		return nil, fmt.Errorf("node %s: %w", id, err)
	}
	return sn, nil
}

// run runs the node until ctx is done; its load reports stop when reports
// is done (the window that measures heartbeats alone).
func (sn *storeNode) run(ctx, reports context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return sn.n.Run(gctx) })
	g.Go(func() error { return sn.maps.Run(gctx) })
	g.Go(func() error { return sn.reg.Run(gctx) })
	g.Go(func() error {
		// Stopped with ctx too: reports is a child of the run's context.
		return sn.rep.Run(reports)
	})
	g.Go(func() error {
		if err := sn.gs.Serve(sn.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("node %s: serve: %w", sn.id, err)
		}
		return nil
	})
	g.Go(func() error { <-gctx.Done(); sn.gs.Stop(); return nil })
	return g.Wait()
}

// ready reports whether the node is registered and holds a map at least
// at version v.
func (sn *storeNode) ready(v uint64) bool {
	ok, _, _ := sn.reg.Registered()
	m := sn.maps.Map()
	return ok && m != nil && m.Version() >= v
}

func (sn *storeNode) close() {
	for _, c := range sn.conns {
		c.Close()
	}
	if sn.n != nil {
		sn.n.Close()
	}
	if sn.lis != nil {
		sn.lis.Close()
	}
}

// fleet is every simulated node.
type fleet struct {
	nodes []*storeNode
}

// newFleet builds n nodes n0001... spread over zones z1..zZ in turn.
func newFleet(n, zones int, addr, dir string) (*fleet, error) {
	f := &fleet{}
	for i := 1; i <= n; i++ {
		sn, err := newStoreNode(fmt.Sprintf("n%04d", i), "z"+strconv.Itoa((i-1)%zones+1), addr, dir)
		if err != nil {
			f.close()
			return nil, err
		}
		f.nodes = append(f.nodes, sn)
	}
	return f, nil
}

// run runs every node until ctx is done; reports as storeNode.run. The
// nodes join batch at a time: each batch is started once the previous
// one has registered (a fleet coming up all at once is measured apart,
// with batch = every node).
func (f *fleet) run(ctx, reports context.Context, batch int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(f.nodes))
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i, sn := range f.nodes {
		if i > 0 && i%batch == 0 {
			logf("%d nodes started, waiting for them to register", i)
			for f.registered() < i && ctx.Err() == nil {
				select {
				case <-ctx.Done():
				case <-t.C:
				}
			}
		}
		wg.Go(func() { errs[i] = sn.run(ctx, reports) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// specs lists the nodes as the directory registers them.
func (f *fleet) specs() []*slotdv1.Node {
	out := make([]*slotdv1.Node, len(f.nodes))
	for i, sn := range f.nodes {
		out[i] = &slotdv1.Node{Id: sn.id, Address: sn.lis.Addr().String(), Zone: sn.zone}
	}
	return out
}

// registered counts the nodes holding a session with slotd.
func (f *fleet) registered() int {
	n := 0
	for _, sn := range f.nodes {
		if ok, _, _ := sn.reg.Registered(); ok {
			n++
		}
	}
	return n
}

// ready counts the nodes registered with a map at version v or newer.
func (f *fleet) ready(v uint64) int {
	n := 0
	for _, sn := range f.nodes {
		if sn.ready(v) {
			n++
		}
	}
	return n
}

func (f *fleet) close() {
	for _, sn := range f.nodes {
		sn.close()
	}
}
