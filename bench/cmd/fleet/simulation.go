package main

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
)

// result is one simulation's figures.
type result struct {
	rf, nodes int
	// startup is from the nodes' start to every node holding the map;
	// registered, with -register-first, to every node registered;
	// bootstrap is the Bootstrap call.
	startup, registered, bootstrap time.Duration
	windows                        []window
	db                             dbFigures
}

// dbFigures is etcd's storage after the moves.
type dbFigures struct {
	moves                     int
	before, after, afterInUse float64 // etcd_mvcc_db_total_size_in_bytes before and after, in use after
	compacted                 float64 // the file after compaction to the last revision and a defrag
	quota                     float64
	revisions                 int64
	// keys counts the directory's keys under each part of the layout
	// (directory/keys.go) after the moves, and values their bytes.
	keys   map[string]int64
	values map[string]int64
}

// simulation drives one cluster through the phases.
type simulation struct {
	cfg config
	cl  *cluster
	f   *fleet
	r   *result
	// stopNodes stops every node and waits for them.
	stopNodes func()
}

// poll calls ok every half second until it returns true, the cluster
// dies, or d passes.
func (s *simulation) poll(ctx context.Context, d time.Duration, what string, ok func() bool) error {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(d)
	for !ok() {
		if err := s.cl.alive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %v", what, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// pause waits d, failing early when the cluster dies or ctx ends.
func (s *simulation) pause(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	return s.poll(ctx, d+time.Minute, "pause", func() bool { return !time.Now().Before(end) })
}

// bootstrap bootstraps the directory at rf (min_isr a majority) over
// nodes (nil: every registered node) and returns its version.
func (s *simulation) bootstrap(ctx context.Context, rf int, nodes []*slotdv1.Node) (uint64, error) {
	req := &slotdv1.BootstrapRequest{Operator: "fleet", Nodes: nodes}
	if rf > 1 {
		req.Replication = &slotdv1.ReplicationPolicy{Rf: uint32(rf), MinIsr: uint32(rf+1) / 2}
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	resp, err := s.cl.admin.Bootstrap(bctx, req)
	if err != nil {
		return 0, fmt.Errorf("bootstrap: %w", err)
	}
	s.r.bootstrap = time.Since(start)
	return resp.GetMap().GetVersion(), nil
}

// measure samples, waits d, and samples again.
func (s *simulation) measure(ctx context.Context, name string, d time.Duration) (window, error) {
	logf("rf %d: measuring %q for %v", s.r.rf, name, d)
	a, err := s.cl.take()
	if err != nil {
		return window{}, err
	}
	if err := s.pause(ctx, d); err != nil {
		return window{}, err
	}
	b, err := s.cl.take()
	if err != nil {
		return window{}, err
	}
	return window{name: name, a: a, b: b}, nil
}

// move makes the configured moves: the first -watched-moves with every
// node running (each commit reaches all of them through slotd's watch),
// the rest with the nodes stopped (etcd's db does not depend on who
// watches; the nodes' own work would slow the moves on one machine).
// Then it reads etcd's db.
func (s *simulation) move(ctx context.Context, rf int) error {
	logf("rf %d: restarting slotd as a follower; this process leads the mover", rf)
	lost, resign, err := s.cl.takeMover(ctx)
	if err != nil {
		return err
	}
	defer resign()
	ctx, cancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	defer func() { cancel(); <-watched }()
	go func() {
		defer close(watched)
		select {
		case <-lost:
			logf("rf %d: this process lost the mover's lead; stopping the moves", rf)
			cancel()
		case <-ctx.Done():
		}
	}()
	// Every node back on the new slotd: registered, its map current.
	v, err := s.cl.dir.Version(ctx)
	if err != nil {
		return err
	}
	n := len(s.f.nodes)
	if err := s.poll(ctx, time.Minute, "nodes back", func() bool { return s.f.ready(v) == n }); err != nil {
		if ctx.Err() != nil {
			return err
		}
		logf("rf %d: %d of %d nodes back on slotd after a minute; moving anyway", rf, s.f.ready(v), n)
	}
	snap, err := s.cl.dir.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("snapshot before the moves: %w", err)
	}
	m := newMover(s.cl.dir, snap, s.cfg.workers, rf)
	first := min(s.cfg.watchedMoves, s.cfg.moves)
	// No liveness loop on this leader: a node whose lease lapses (or all
	// of them, once stopped) stays active, so every move stays possible.
	// The steady windows, led by slotd, include the loop's cost.
	a, err := s.moveWindow(ctx, m, first, fmt.Sprintf("%d moves, %d at once, every node watching", first, s.cfg.workers))
	if err != nil {
		return err
	}
	if rest := s.cfg.moves - first; rest > 0 {
		logf("rf %d: stopping the nodes for the other %d moves", rf, rest)
		s.stopNodes()
		if _, err := s.moveWindow(ctx, m, s.cfg.moves, fmt.Sprintf("%d moves, %d at once, nodes stopped", rest, s.cfg.workers)); err != nil {
			return err
		}
	}
	b := s.r.windows[len(s.r.windows)-1].b
	db := dbFigures{
		moves: int(m.done.Load()), before: a.etcd.sum(mDBSize), after: b.etcd.sum(mDBSize), afterInUse: b.etcd.sum(mDBInUse),
		quota: b.etcd.sum(mQuota), keys: map[string]int64{}, values: map[string]int64{},
	}
	if err := s.countKeys(ctx, &db); err != nil {
		return err
	}
	if err := s.compact(ctx, &db); err != nil {
		return err
	}
	s.r.db = db
	return nil
}

// moveWindow makes moves until m has made total, as a window named name,
// and returns the sample it started with.
func (s *simulation) moveWindow(ctx context.Context, m *mover, total int, name string) (sample, error) {
	logf("rf %d: %s (%d transactions each)", m.rf, name, m.steps())
	a, err := s.cl.take()
	if err != nil {
		return a, err
	}
	before := int(m.done.Load())
	step := max(s.cfg.moves/10, 1)
	made, err := m.run(ctx, total, func(n int) {
		if n%step == 0 {
			logf("rf %d: %d moves", m.rf, n)
		}
	})
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("moves stopped after %d: %w", made, ctx.Err())
	}
	if err != nil {
		return a, err
	}
	b, err := s.cl.take()
	if err != nil {
		return a, err
	}
	s.r.windows = append(s.r.windows, window{name: name, a: a, b: b, moves: made - before, steps: m.steps()})
	return a, nil
}

// layoutParts are the parts of the directory's key layout counted after
// the moves (directory/keys.go names them all).
var layoutParts = []string{"owners/", "replicas/", "nodes/", "alive/", "history/", "audit/", "moves/", "results/", "plans/"}

// countKeys counts the keys and value bytes of each part of the layout.
func (s *simulation) countKeys(ctx context.Context, db *dbFigures) error {
	for _, p := range layoutParts {
		resp, err := s.cl.cli.Get(ctx, directory.DefaultPrefix+p, clientv3.WithPrefix())
		if err != nil {
			return fmt.Errorf("count keys under %s: %w", p, err)
		}
		db.keys[p] = resp.Count
		for _, kv := range resp.Kvs {
			db.values[p] += int64(len(kv.Key) + len(kv.Value))
		}
	}
	return nil
}

// compact compacts etcd to its last revision and defragments it: what the
// db holds once the hour of history autocompaction keeps has passed.
func (s *simulation) compact(ctx context.Context, db *dbFigures) error {
	resp, err := s.cl.cli.Get(ctx, "compact-probe")
	if err != nil {
		return fmt.Errorf("read etcd's revision: %w", err)
	}
	db.revisions = resp.Header.Revision
	if _, err := s.cl.cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("compact etcd: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := s.cl.cli.Defragment(dctx, s.cl.etcdURL); err != nil {
		return fmt.Errorf("defragment etcd: %w", err)
	}
	m, err := scrape(s.cl.etcdURL + "/metrics")
	if err != nil {
		return err
	}
	db.compacted = m.sum(mDBSize)
	return nil
}
