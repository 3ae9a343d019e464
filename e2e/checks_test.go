package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/slotd/slotd/api/redirect"
	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/e2e/linz"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slotkv/workload"
	"github.com/slotd/slotd/slots"
)

// loaded is a key set written with `slotkv load`, verified with `slotkv check`.
type loaded struct {
	prefix     string
	keys, size int
}

// scenario is one run: a cluster, keys loaded before the faults, a
// workload recording its history, and a poller that watches the directory
// version on every slotd.
type scenario struct {
	name   string
	c      *cluster
	start  time.Time
	loads  []loaded
	w      *workload.Workload
	stopW  context.CancelFunc
	wDone  chan error
	before *slotmap.Map
	// clientErrorsOK: the scenario takes a store node away, so calls to
	// its slots may fail (they are still checked: unknown outcomes must be
	// linearizable, acknowledged writes must survive).
	clientErrorsOK bool

	finished bool // finish ran (else the row says the test failed early)

	stopPoll context.CancelFunc
	pollDone chan struct{}
	pollMu   sync.Mutex // guards lastVer and backwards
	lastVer  []uint64
	back     []string
}

// begin starts a cluster, loads keys, starts the version poller and the
// workload (wcfg.KV is filled in).
func begin(c *cluster, name string, loads []loaded, wcfg workload.Config) *scenario {
	c.t.Helper()
	s := &scenario{name: name, c: c, start: time.Now(), loads: loads, lastVer: make([]uint64, len(c.slotdEP))}
	for _, l := range loads {
		c.load(l.prefix, l.keys, l.size)
	}
	m, err := c.getMap(0)
	if err != nil {
		c.t.Fatal(err)
	}
	s.before = m
	pctx, stop := context.WithCancel(context.Background())
	s.stopPoll, s.pollDone = stop, make(chan struct{})
	go s.poll(pctx)
	c.t.Cleanup(s.stopPolling)

	wcfg.KV = c.kv
	w, err := workload.New(wcfg)
	if err != nil {
		c.t.Fatal(err)
	}
	wctx, stopW := context.WithCancel(context.Background())
	s.w, s.stopW, s.wDone = w, stopW, make(chan error, 1)
	go func() { s.wDone <- w.Run(wctx) }()
	c.t.Cleanup(s.stopWorkload)
	c.t.Cleanup(func() {
		if !s.finished {
			addResult(result{scenario: s.name, linearizable: "not checked: failed before its checks", elapsed: time.Since(s.start)})
		}
	})
	return s
}

func (s *scenario) stopPolling() {
	s.stopPoll()
	<-s.pollDone
}

func (s *scenario) stopWorkload() {
	if s.stopW != nil {
		s.stopW()
		<-s.wDone
		s.stopW = nil
	}
}

// poll reads the map version of every running slotd every 100ms and notes
// any replica whose version went back.
func (s *scenario) poll(ctx context.Context) {
	defer close(s.pollDone)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		for i, ep := range s.c.slotdEP {
			if !s.c.slotd[i].Running() {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			r, err := slotdv1.NewDirectoryClient(s.c.conn(ep)).GetMap(cctx, &slotdv1.GetMapRequest{IfNewerThan: ^uint64(0)})
			cancel()
			if err != nil {
				continue
			}
			s.pollMu.Lock()
			if r.GetVersion() < s.lastVer[i] {
				s.back = append(s.back, fmt.Sprintf("%s: version %d after %d", ep, r.GetVersion(), s.lastVer[i]))
			}
			s.lastVer[i] = max(s.lastVer[i], r.GetVersion())
			s.pollMu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// finish stops the workload and runs every check, then records the row.
func (s *scenario) finish() {
	c, t := s.c, s.c.t
	t.Helper()
	s.finished = true
	s.stopWorkload()
	var h workload.History
	c.h.Eventually(30*time.Second, "final reads of the workload's keys", func() error {
		var err error
		h, err = s.w.Final(context.Background())
		return err
	})
	s.stopPolling()
	row := result{scenario: s.name, linearizable: "no"}
	defer func() {
		row.elapsed = time.Since(s.start)
		addResult(row)
	}()
	st := h.Stats()
	row.ops, row.errs = st.Ops, st.Errors
	t.Logf("%s: %d operations (%d reads, %d writes), %d client errors (%d unknown outcome), %d redirects followed",
		s.name, st.Ops, st.Reads, st.Writes, st.Errors, st.Unknown, c.kv.Redirects())

	// 1. Every acknowledged write is readable with its latest value.
	lost := h.LostWrites()
	row.lost = len(lost)
	if len(lost) > 0 {
		t.Errorf("lost writes: %d, first: %v", len(lost), lost[:min(5, len(lost))])
	}
	for _, l := range s.loads {
		if n, examples := s.checkLoaded(l); n > 0 {
			row.lost += n
			t.Errorf("slotkv check --prefix %s: %d keys missing, wrong or unreadable: %v", l.prefix, n, examples)
		}
	}
	if st.Errors > 0 && !s.clientErrorsOK {
		t.Errorf("client errors: %d, first: %v", st.Errors, h.FirstErrors(5))
	}

	// 2. Every slot has exactly one owner; versions only grew.
	final := s.checkMap()

	// 3. No node serves a slot it does not own.
	s.checkOwnership(final)

	// 4. The history is linearizable.
	if b, err := json.Marshal(h.Ops); err == nil {
		_ = os.WriteFile(artifact(s.name+"-history.json"), b, 0o644)
	}
	res := linz.Check(h, time.Minute)
	row.linearizable = map[bool]string{true: "yes", false: "no (" + string(res.Outcome) + ")"}[res.OK()]
	if !res.OK() {
		path := artifact(s.name + "-history.html")
		if err := res.Visualize(path); err != nil {
			t.Logf("visualize: %v", err)
		}
		t.Errorf("history of %d operations is not linearizable (%s); visualization: %s", res.Ops, res.Outcome, path)
	}
}

// artifact is where a failure's file goes: $E2E_ARTIFACTS, or a directory
// under the system's temp dir that outlives the test (t.TempDir would be
// removed with the evidence).
func artifact(name string) string {
	dir := os.Getenv("E2E_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "slotd-e2e-artifacts")
	}
	_ = os.MkdirAll(dir, 0o755)
	return filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(name))
}

// checkLoaded runs `slotkv check` and returns how many keys were missing,
// wrong or unreadable, with the first few.
func (s *scenario) checkLoaded(l loaded) (int, []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, code := s.c.h.Run(ctx, "slotkv", nil, "check", "--slotd", strings.Join(s.c.slotdEP, ","), "--prefix", l.prefix,
		"--keys", fmt.Sprint(l.keys), "--size", fmt.Sprint(l.size), "-o", "json")
	var sum struct {
		Bad, Errors int
		Examples    []string
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		return l.keys, []string{fmt.Sprintf("no summary: exit %d: %s%s", code, out, errOut)}
	}
	if n := sum.Bad + sum.Errors; n > 0 || code != 0 {
		return max(n, 1), append(sum.Examples, errOut)
	}
	return 0, nil
}

// checkMap reads the final map from every running slotd: they agree, every
// slot has exactly one owner among the map's nodes, no move is left in
// flight, no slot's version went back, and no replica's version went back
// while the scenario ran. It returns the map.
func (s *scenario) checkMap() *slotmap.Map {
	c, t := s.c, s.c.t
	t.Helper()
	var final *slotmap.Map
	c.h.Eventually(30*time.Second, "every slotd serves the same settled map", func() error {
		final = nil
		for i, p := range c.slotd {
			if !p.Running() {
				continue
			}
			m, err := c.getMap(i)
			if err != nil {
				return err
			}
			if len(m.Migrations()) > 0 {
				return fmt.Errorf("%s: moves in flight: %v", c.slotdEP[i], m.Migrations())
			}
			if final != nil && m.Version() != final.Version() {
				return fmt.Errorf("replicas at versions %d and %d", final.Version(), m.Version())
			}
			final = m
		}
		return nil
	})
	if final.Version() < s.before.Version() {
		t.Errorf("directory version went back: %d before, %d after", s.before.Version(), final.Version())
	}
	owned := 0
	for _, n := range final.Nodes() {
		set := final.SlotsOf(n.ID)
		owned += set.Count()
	}
	if owned != slots.Count {
		t.Errorf("the nodes own %d slots together, want exactly %d", owned, slots.Count)
	}
	for i := range slots.Count {
		sl := slots.MustNew(i)
		r := final.RouteSlot(sl)
		if r.Owner() == "" || r.Addr() == "" {
			t.Errorf("slot %d has no owner", i)
			break
		}
		if final.SlotVersion(sl) < s.before.SlotVersion(sl) {
			t.Errorf("slot %d: version %d after %d", i, final.SlotVersion(sl), s.before.SlotVersion(sl))
			break
		}
	}
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	if len(s.back) > 0 {
		t.Errorf("a replica's directory version went back: %v", s.back)
	}
	return final
}

// checkOwnership asks every running node, directly (no SDK), for keys of
// slots it owns (served) and of slots others own (MOVED to the owner).
func (s *scenario) checkOwnership(m *slotmap.Map) {
	c := s.c
	c.t.Helper()
	for _, n := range m.Nodes() {
		p, ok := c.nodes[n.ID]
		if !ok || !p.Running() {
			continue
		}
		// A node may own nothing (drained, or emptied by a rollback).
		var mine, others []string
		for i := 0; (len(mine) < 8 || len(others) < 16) && i < 100_000; i++ {
			k := fmt.Sprintf("own-probe:%d", i)
			if m.RouteString(k).Owner() != n.ID {
				if len(others) < 16 {
					others = append(others, k)
				}
			} else if len(mine) < 8 {
				mine = append(mine, k)
			}
		}
		kv := c.kvAt(n.Addr)
		c.h.Eventually(20*time.Second, n.ID+" serves its slots and only those", func() error {
			for _, k := range mine {
				if _, err := kv.Get(c.ctx(), &kvpb.GetRequest{Key: []byte(k)}); err != nil {
					return fmt.Errorf("%s owns %q's slot but answered %v", n.ID, k, err)
				}
			}
			for _, k := range others {
				_, err := kv.Get(c.ctx(), &kvpb.GetRequest{Key: []byte(k)})
				r, ok := redirect.FromError(err)
				want := m.RouteString(k)
				if !ok || r.Kind != redirect.Moved || r.Owner != want.Owner() || r.Addr != want.Addr() {
					return fmt.Errorf("%s asked for %q (slot %d, owner %s): answered %v, want MOVED to %s", n.ID, k, want.Slot.Int(), want.Owner(), err, want.Addr())
				}
			}
			return nil
		})
	}
}
