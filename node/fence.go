package node

import (
	"context"
	"time"

	"github.com/slotd/slotd/slots"
)

// FenceInfo says why a slot is fenced.
type FenceInfo struct {
	Version uint64 // directory version the mover acted at
	MoveID  string
	// since is when this process put the fence up (zero for a fence it
	// found in its state at start); not persisted.
	since time.Time
}

// Fenced reports whether slot s is fenced.
func (n *Node) Fenced(s slots.Slot) bool { return n.fenced[s.Int()].Load() }

func (n *Node) fencedError(s slots.Slot) error {
	n.fenceMu.Lock()
	fi := n.fences[s]
	n.fenceMu.Unlock()
	return &FencedError{Slot: s, Version: fi.Version, MoveID: fi.MoveID, RetryAfter: n.fenceRetryAfter(fi)}
}

// minFenceRetry is the least a fenced answer suggests waiting.
const minFenceRetry = time.Millisecond

// fenceRetryAfter is the wait a fenced answer suggests: as long as the
// fence has been up (at least minFenceRetry, at most
// Config.FenceRetryAfter). A move's fence lasts milliseconds, until its
// commit, so a writer that asks again after the fence's own age finds it
// gone at once in the common case, and backs off about twice as long each
// time it does not (an etcd election holding the commit).
func (n *Node) fenceRetryAfter(fi FenceInfo) time.Duration {
	if fi.since.IsZero() {
		return n.cfg.FenceRetryAfter
	}
	return min(max(n.cfg.Clock.Now().Sub(fi.since), minFenceRetry), n.cfg.FenceRetryAfter)
}

// Fence stops writes to slot s for move moveID at directory version, persists
// that, and returns the fence sequence: the last change captured for the slot
// (0 without a capture). Once the target has applied changes up to it, it
// holds every acknowledged write. Writes in flight finish first. Fencing a
// fenced slot again returns the same sequence.
func (n *Node) Fence(ctx context.Context, s slots.Slot, moveID string, version uint64) (fenceSeq uint64, err error) {
	mu := &n.slotMu[s.Int()]
	mu.Lock()
	defer mu.Unlock()
	if err := n.setFence(s, true, FenceInfo{Version: version, MoveID: moveID}); err != nil {
		return 0, err
	}
	if c := n.captureOf(s); c != nil {
		fenceSeq = c.setFence(true)
	}
	n.lg.Info("slot fenced", "slot", s.Int(), "move", moveID, "version", version, "fence_seq", fenceSeq)
	return fenceSeq, nil
}

// Unfence lets writes to slot s in again, after an aborted move. Unfencing
// an unfenced slot is a no-op.
func (n *Node) Unfence(ctx context.Context, s slots.Slot) error {
	mu := &n.slotMu[s.Int()]
	mu.Lock()
	defer mu.Unlock()
	if !n.Fenced(s) {
		return nil
	}
	if err := n.setFence(s, false, FenceInfo{}); err != nil {
		return err
	}
	if c := n.captureOf(s); c != nil {
		c.setFence(false)
	}
	n.lg.Info("slot unfenced", "slot", s.Int())
	return nil
}

// setFence persists and applies a fence change; the caller holds slotMu[s].
func (n *Node) setFence(s slots.Slot, on bool, fi FenceInfo) error {
	n.fenceMu.Lock()
	defer n.fenceMu.Unlock()
	if _, was := n.fences[s]; was == on {
		return nil
	}
	// Persist first, always synced (even with Config.NoSync): a fence must
	// never be in force only in memory, and one lost in a crash could let
	// the node accept writes for a slot it handed off.
	var err error
	if on {
		err = n.state.set(slotKey(fencePrefix, s), fenceValue(fi), true)
	} else {
		err = n.state.delete(slotKey(fencePrefix, s), true)
	}
	if err != nil {
		return err
	}
	if on {
		fi.since = n.cfg.Clock.Now()
		n.fences[s] = fi
	} else {
		delete(n.fences, s)
	}
	n.fenced[s.Int()].Store(on)
	n.m.fenced.Set(float64(len(n.fences)))
	return nil
}
