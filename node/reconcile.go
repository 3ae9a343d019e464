package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/slots"
)

// Reconciliation defaults.
const (
	DefaultReconcileInterval = 15 * time.Second
	DefaultReconcileGrace    = 30 * time.Second
)

// WholeMap is a MapSource that can also give its whole map at one version:
// owners and the moves in flight. Reconciliation needs one (ClusterMap,
// ClientMap and StaticMap are); with another MapSource it does not run.
type WholeMap interface {
	MapSource
	// Map returns the newest map, nil while there is none.
	Map() *slotmap.Map
}

// FreshMapFunc reads the map from where the truth is written (slotd's
// Recovery.FreshMap reads etcd), not from a watched copy that may lag.
type FreshMapFunc func(ctx context.Context) (*slotmap.Map, error)

// What reconciliation found held and unexplained, and does about it.
// The kinds label slotd_node_reconcile_actions_total.
const (
	actDrop         = "drop"          // data, capture, import or fence of a slot nobody explains: Drop
	actEndCapture   = "end_capture"   // a capture on an owned slot no move out of it explains
	actForgetImport = "forget_import" // import progress on a slot this node owns now
	actUnfence      = "unfence"       // a fence on an owned slot whose move is over
)

// held is what the node holds of one slot.
type held struct {
	data    bool
	bytes   int64
	capture string // move id of the capture, "" for none
	hasCap  bool
	imp     string // move id of the import state
	hasImp  bool
	fence   FenceInfo
	fenced  bool
	drop    bool
}

// finding is one thing to clean up, and since when it has been unexplained.
type finding struct {
	kind  string
	since time.Time
	h     held
}

type findingKey struct {
	slot slots.Slot
	kind string
}

// ReconcileOnce runs one pass of reconciliation and returns the number of
// clean-up actions it started. It compares what the node holds (slot data,
// captures, import progress, fences, drops) with its map (owners and the
// moves in flight, all at one version); what nothing in the map explains is
// remembered, and once it has stayed unexplained for the grace period it
// is confirmed against a fresh map (Config.FreshMap, else the node's own)
// and cleaned up:
//
//   - a slot this node neither owns nor receives in a move in flight:
//     dropped, under the drop throttle (data, capture, import progress;
//     its fence goes once the slot is empty);
//   - an owned slot's capture that no move out of it explains: ended;
//   - import progress of a slot this node now owns: forgotten;
//   - an owned slot's fence that no move out of it explains: lifted. The
//     fresh map is what makes that safe: a lagging map would show this
//     node as owner of a slot it has handed off.
//
// It does nothing while the node has no map, or a map older than
// RequireMapVersion.
func (n *Node) ReconcileOnce(ctx context.Context) (int, error) {
	n.recMu.Lock()
	defer n.recMu.Unlock()
	m := n.wholeMap()
	if m == nil || m.Empty() {
		return 0, nil
	}
	if m.Version() < n.minMap.Load() {
		return 0, nil
	}
	hs, err := n.holdings(ctx)
	if err != nil {
		return 0, err
	}
	now := n.cfg.Clock.Now()
	seen := map[findingKey]bool{}
	var orphan int64
	for s, h := range hs {
		for _, kind := range n.unexplained(m, s, h) {
			k := findingKey{s, kind}
			seen[k] = true
			f, ok := n.findings[k]
			if !ok {
				f = &finding{kind: kind, since: now}
				n.findings[k] = f
			}
			f.h = h
			if kind == actDrop {
				orphan += h.bytes
			}
		}
	}
	for k := range n.findings {
		if !seen[k] {
			delete(n.findings, k)
		}
	}
	n.orphanBytes.Store(orphan)
	n.m.orphanBytes.Set(float64(orphan))

	var due []findingKey
	for k, f := range n.findings {
		if now.Sub(f.since) >= n.cfg.ReconcileGrace && !f.h.drop {
			due = append(due, k)
		}
	}
	if len(due) == 0 {
		return 0, nil
	}
	fresh := m
	if n.cfg.FreshMap != nil {
		if fresh, err = n.cfg.FreshMap(ctx); err != nil {
			return 0, fmt.Errorf("node: reconcile: fresh map: %w", err)
		}
		if fresh == nil || fresh.Empty() {
			return 0, nil
		}
	}
	acted := 0
	var errs []error
	for _, k := range due {
		f := n.findings[k]
		if !contains(n.unexplained(fresh, k.slot, f.h), k.kind) {
			// The fresh map explains it: this node's map is behind.
			delete(n.findings, k)
			continue
		}
		ok, err := n.act(ctx, k.slot, f, fresh.Version())
		switch {
		case errors.Is(err, ErrMapBehind), errors.Is(err, ErrNoMap), errors.Is(err, ErrMoveMismatch), errors.Is(err, ErrOwned):
			// Not yet, or no longer: the next pass decides again.
			n.lg.Debug("reconcile action put off", "slot", k.slot.Int(), "kind", k.kind, "err", err)
		case err != nil:
			errs = append(errs, err)
		case ok:
			acted++
			n.m.reconcileActions.WithLabelValues(k.kind).Inc()
			n.lg.Info("reconcile cleaned up", "slot", k.slot.Int(), "kind", k.kind,
				"bytes", f.h.bytes, "unexplained_for", now.Sub(f.since).String(), "version", fresh.Version())
			delete(n.findings, k)
		}
	}
	return acted, errors.Join(errs...)
}

func contains(ks []string, k string) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// unexplained lists what map m does not explain of what the node holds of
// slot s.
func (n *Node) unexplained(m *slotmap.Map, s slots.Slot, h held) []string {
	me := n.cfg.ID
	mg, moving := m.Migration(s)
	if m.OwnerID(s) != me {
		if moving && mg.To == me {
			return nil // the target of a move in flight: a copy in progress
		}
		if h.data || h.hasCap || h.hasImp || h.fenced {
			return []string{actDrop}
		}
		return nil
	}
	var out []string
	out_ := moving && mg.From == me
	if h.hasCap && !(out_ && (h.capture == "" || h.capture == mg.MoveID)) {
		out = append(out, actEndCapture)
	}
	if h.hasImp {
		out = append(out, actForgetImport)
	}
	if h.fenced && !(out_ && (h.fence.MoveID == "" || h.fence.MoveID == mg.MoveID)) {
		out = append(out, actUnfence)
	}
	return out
}

// act cleans up one finding, rechecking under the slot's lock that the node
// still holds what the pass saw; ok is false when it no longer did.
func (n *Node) act(ctx context.Context, s slots.Slot, f *finding, version uint64) (ok bool, err error) {
	switch f.kind {
	case actDrop:
		return n.drop(ctx, s, version, 0, f.h.imp, true)
	case actEndCapture:
		if c := n.captureOf(s); c == nil || c.id != f.h.capture {
			return false, nil
		}
		return true, n.EndCapture(ctx, s, f.h.capture)
	case actForgetImport:
		return n.forgetImport(s, f.h.imp)
	case actUnfence:
		return n.liftFence(s, f.h.fence)
	}
	return false, fmt.Errorf("node: reconcile: unknown action %q", f.kind)
}

// forgetImport forgets the import progress of slot s if it is still moveID's.
func (n *Node) forgetImport(s slots.Slot, moveID string) (bool, error) {
	// The import progress is what tells the takeover that the slot came
	// by a move: it must have looked at the map that gave the slot first.
	n.lookAtMap()
	mu := &n.slotMu[s.Int()]
	mu.Lock()
	defer mu.Unlock()
	n.impMu.Lock()
	imp := n.imports[s]
	if imp == nil || imp.MoveID != moveID {
		n.impMu.Unlock()
		return false, nil
	}
	delete(n.imports, s)
	n.impMu.Unlock()
	return true, n.state.delete(slotKey(importPrefix, s), !n.cfg.NoSync)
}

// liftFence lifts the fence of slot s if it is still the one the pass saw.
func (n *Node) liftFence(s slots.Slot, fi FenceInfo) (bool, error) {
	mu := &n.slotMu[s.Int()]
	mu.Lock()
	defer mu.Unlock()
	n.fenceMu.Lock()
	cur, fenced := n.fences[s]
	n.fenceMu.Unlock()
	if !fenced || cur != fi {
		return false, nil
	}
	if err := n.setFence(s, false, FenceInfo{}); err != nil {
		return false, err
	}
	if c := n.captureOf(s); c != nil {
		c.setFence(false)
	}
	n.lg.Info("fence of a move that is over lifted", "slot", s.Int(), "move", fi.MoveID)
	return true, nil
}

// holdings lists every slot the node holds anything of. Data comes from the
// store's SlotLister when it has one, else from SlotSize of every slot;
// the bytes of a slot with data come from SlotSize.
func (n *Node) holdings(ctx context.Context) (map[slots.Slot]held, error) {
	out := map[slots.Slot]held{}
	if l, ok := n.store.(SlotLister); ok {
		set, err := l.SlotsWithData(ctx)
		if err != nil {
			return nil, fmt.Errorf("node: reconcile: list slots: %w", err)
		}
		for s := range set.All() {
			out[s] = held{data: true}
		}
	} else {
		for i := range slots.Count {
			s := slots.MustNew(i)
			keys, _, err := n.store.SlotSize(ctx, s)
			if err != nil {
				return nil, fmt.Errorf("node: reconcile: size of slot %d: %w", i, err)
			}
			if keys > 0 {
				out[s] = held{data: true}
			}
		}
	}
	n.capMu.Lock()
	for s, c := range n.captures {
		h := out[s]
		h.hasCap, h.capture = true, c.id
		out[s] = h
	}
	n.capMu.Unlock()
	n.impMu.Lock()
	for s, imp := range n.imports {
		h := out[s]
		h.hasImp, h.imp = true, imp.MoveID
		out[s] = h
	}
	n.impMu.Unlock()
	n.fenceMu.Lock()
	for s, fi := range n.fences {
		h := out[s]
		h.fenced, h.fence = true, fi
		out[s] = h
	}
	n.fenceMu.Unlock()
	n.dropMu.Lock()
	for s := range n.dropping {
		h := out[s]
		h.drop = true
		out[s] = h
	}
	n.dropMu.Unlock()
	m := n.wholeMap()
	for s, h := range out {
		if !h.data || (m != nil && m.OwnerID(s) == n.cfg.ID) {
			continue // only unowned data counts as orphan bytes
		}
		_, b, err := n.store.SlotSize(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("node: reconcile: size of slot %d: %w", s.Int(), err)
		}
		h.bytes = b
		out[s] = h
	}
	return out, nil
}

// SlotLister is what a Store may implement so that reconciliation learns
// which slots hold data in one call instead of a SlotSize per slot.
type SlotLister interface {
	// SlotsWithData returns the slots that hold at least one key.
	SlotsWithData(ctx context.Context) (slots.Set, error)
}

// OrphanBytes returns the bytes of data the last reconciliation pass found
// on slots nothing in the map explains (being dropped, or waiting out the
// grace period): 0 when the node is clean.
func (n *Node) OrphanBytes() int64 { return n.orphanBytes.Load() }

// RequireMapVersion makes the node treat any map older than v as no map:
// it serves nothing and reconciles nothing against it. A node calls it with
// the version of its registration, so that a node declared failed and back
// with its old data never acts on a map from before that (see slotctl nodes
// fail). Lower values than one already set are ignored.
func (n *Node) RequireMapVersion(v uint64) {
	for {
		cur := n.minMap.Load()
		if v <= cur || n.minMap.CompareAndSwap(cur, v) {
			return
		}
	}
}

func (n *Node) wholeMap() *slotmap.Map {
	w, ok := n.cfg.Map.(WholeMap)
	if !ok {
		return nil
	}
	return w.Map()
}

// runReconcile reconciles at start and every ReconcileInterval until ctx
// is done.
func (n *Node) runReconcile(ctx context.Context) {
	if _, ok := n.cfg.Map.(WholeMap); !ok || n.cfg.ReconcileInterval < 0 {
		return
	}
	for {
		if _, err := n.ReconcileOnce(ctx); err != nil && ctx.Err() == nil {
			n.lg.Warn("reconcile pass failed", "err", err)
		}
		wait := n.cfg.ReconcileInterval
		if n.wholeMap() == nil {
			// The pass "at start" waits for the first map, not a full interval.
			wait = min(wait, time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-n.cfg.Clock.After(wait):
		}
	}
}
