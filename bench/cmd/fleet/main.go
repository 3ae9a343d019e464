// Command fleet simulates slotd at fleet scale on one machine: etcd and
// slotd (at its defaults) as two processes from bin/, and N store nodes in
// this process, each the real node library (node.Registrar heartbeating
// over gRPC, node.Reporter sending load reports, the SDK's map watch,
// the store service on a listener of its own) over a store that holds
// nothing. It measures what heartbeats, load reports and moves cost etcd
// and slotd over steady windows, then makes directory-level moves and
// reads etcd's db size against the history and audit bounds. It prints a
// Markdown section; docs/scale.md explains the figures.
//
//	make build && cd bench && go run ./cmd/fleet -bin ../bin        # make fleet
//	go run ./cmd/fleet -bin ../bin -nodes 200 -window 20s -moves 10000 -rf 1
//
// Every process it starts is stopped before it exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type config struct {
	bin, tmp       string
	nodes, zones   int
	rfs            []int
	settle, window time.Duration
	quietWindow    time.Duration
	moves, workers int
	joinBatch      int
	registerFirst  bool
	watchedMoves   int
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s fleet: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func main() {
	var c config
	var rfs string
	flag.StringVar(&c.bin, "bin", "../bin", "directory holding the slotd binary (make build)")
	flag.StringVar(&c.tmp, "tmp", "", "work directory on disk for etcd's data and the logs (default: a new one under $TMPDIR)")
	flag.IntVar(&c.nodes, "nodes", 1000, "store nodes")
	flag.IntVar(&c.zones, "zones", 3, "zones the nodes are spread over in turn (rf 3 needs 3)")
	flag.StringVar(&rfs, "rf", "1,3", "replication factors to run, one cluster each (1, 3 or both)")
	flag.DurationVar(&c.settle, "settle", 20*time.Second, "wait after every node holds the bootstrapped map, before measuring")
	flag.DurationVar(&c.window, "window", 60*time.Second, "the steady window: heartbeats and load reports")
	flag.DurationVar(&c.quietWindow, "quiet-window", 30*time.Second, "the window with load reports stopped (heartbeats alone)")
	flag.IntVar(&c.moves, "moves", 100_000, "directory-level moves before etcd's db size is read")
	flag.IntVar(&c.workers, "move-workers", 12, "moves made at once (slotd's default --move-parallelism is 12)")
	flag.IntVar(&c.joinBatch, "join-batch", 100, "nodes started at once; the next batch starts when they have registered (-join-batch equal to -nodes: all at once)")
	flag.BoolVar(&c.registerFirst, "register-first", false, "let every node register itself before the bootstrap (slotctl init with no --node), instead of naming them in it")
	flag.IntVar(&c.watchedMoves, "watched-moves", 2000, "of -moves, how many are made while every node runs and watches the map; the rest with the nodes stopped")
	flag.Parse()
	for f := range strings.SplitSeq(rfs, ",") {
		rf, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || rf < 1 || rf > c.zones {
			fmt.Fprintf(os.Stderr, "fleet: -rf %q: want replication factors from 1 to -zones (%d), e.g. -rf 1,3\n", rfs, c.zones)
			os.Exit(2)
		}
		c.rfs = append(c.rfs, rf)
	}
	if c.nodes < c.zones || c.workers < 1 || c.moves < 0 || c.joinBatch < 1 {
		fmt.Fprintln(os.Stderr, "fleet: -nodes must be at least -zones, -move-workers and -join-batch at least 1, -moves not negative")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "fleet: %v\n", err)
		os.Exit(1)
	}
}

// run runs one simulation per replication factor and prints a section for each.
func run(ctx context.Context, c config, w io.Writer) (err error) {
	tmp := c.tmp
	if tmp == "" {
		if tmp, err = os.MkdirTemp("", "fleet-"); err != nil {
			return err
		}
		// Kept when the run fails: the logs say why.
		defer func() {
			if err == nil {
				os.RemoveAll(tmp)
			}
		}()
	}
	// The nodes' own state (fences, change logs: none here) on tmpfs
	// when there is one; etcd's data stays on disk, where its fsyncs are.
	stateRoot := tmp
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "fleet-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		stateRoot = d
	}
	for _, rf := range c.rfs {
		dir, err := os.MkdirTemp(tmp, "rf"+strconv.Itoa(rf)+"-")
		if err != nil {
			return err
		}
		state, err := os.MkdirTemp(stateRoot, "rf"+strconv.Itoa(rf)+"-")
		if err != nil {
			return err
		}
		logf("rf %d: %d nodes in %d zones; logs in %s", rf, c.nodes, c.zones, dir)
		r, err := simulate(ctx, c, rf, dir, state)
		if err != nil {
			return fmt.Errorf("rf %d: %w (logs in %s)", rf, err, dir)
		}
		// Printed as each one ends: a later one that fails keeps these.
		report(w, c, []*result{r})
	}
	return nil
}

// simulate runs one cluster at rf through every phase.
func simulate(ctx context.Context, c config, rf int, dir, state string) (*result, error) {
	cl, err := startCluster(ctx, c.bin, dir)
	if err != nil {
		return nil, err
	}
	defer cl.stop()
	start := time.Now()
	f, err := newFleet(c.nodes, c.zones, cl.slotdAddr, state)
	if err != nil {
		return nil, err
	}
	defer f.close()
	r := &result{rf: rf, nodes: c.nodes}
	sim := &simulation{cfg: c, cl: cl, f: f, r: r}
	// Bootstrapped with every node named (slotctl init --node ...), the
	// directory registers them before any of them runs; -register-first
	// lets them register themselves first (slotctl init with no --node).
	var v uint64
	if !c.registerFirst {
		if v, err = sim.bootstrap(ctx, rf, f.specs()); err != nil {
			return nil, err
		}
	}
	runCtx, stopNodes := context.WithCancel(ctx)
	reports, stopReports := context.WithCancel(runCtx)
	defer stopReports()
	done := make(chan error, 1)
	go func() { done <- f.run(runCtx, reports, c.joinBatch) }()
	// Shutdown order: 1. the nodes stop (their streams end while slotd
	// still serves), 2. slotd and etcd (the deferred cl.stop).
	var once sync.Once
	sim.stopNodes = func() {
		once.Do(func() {
			stopNodes()
			if err := <-done; err != nil {
				logf("nodes stopped: %v", err)
			}
		})
	}
	defer sim.stopNodes()
	if c.registerFirst {
		if err := sim.poll(ctx, 15*time.Minute, "registration", func() bool { return f.registered() == c.nodes }); err != nil {
			return nil, fmt.Errorf("%w (%d of %d registered)", err, f.registered(), c.nodes)
		}
		r.registered = time.Since(start)
		if v, err = sim.bootstrap(ctx, rf, nil); err != nil {
			return nil, err
		}
	}
	if err := sim.poll(ctx, 10*time.Minute, "maps", func() bool { return f.ready(v) == c.nodes }); err != nil {
		return nil, fmt.Errorf("%w (%d of %d registered with version %d)", err, f.ready(v), c.nodes, v)
	}
	r.startup = time.Since(start)
	logf("rf %d: %d nodes registered and mapped in %v; settling %v", rf, c.nodes, r.startup.Round(time.Second), c.settle)
	if err := sim.pause(ctx, c.settle); err != nil {
		return nil, err
	}
	steady, err := sim.measure(ctx, "heartbeats + load reports", c.window)
	if err != nil {
		return nil, err
	}
	r.windows = append(r.windows, steady)
	// Reports stopped: one report interval for those in flight to land.
	stopReports()
	if err := sim.pause(ctx, 10*time.Second); err != nil {
		return nil, err
	}
	quiet, err := sim.measure(ctx, "heartbeats alone", c.quietWindow)
	if err != nil {
		return nil, err
	}
	r.windows = append(r.windows, quiet)
	if c.moves > 0 {
		if err := sim.move(ctx, rf); err != nil {
			return nil, err
		}
	}
	return r, nil
}
