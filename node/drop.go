package node

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/slotd/slotd/slots"
)

// Drop deletes slot s's data in the background at bytesPerSec (0: the
// configured default), ends its capture, forgets its import state, and lifts
// its fence once the slot is empty. version is the directory version that
// committed the slot away from this node: Drop returns ErrMapBehind until the
// node's map has reached it. Drop refuses a slot this node owns (ErrOwned).
// started is false when a drop of the slot was already running.
func (n *Node) Drop(ctx context.Context, s slots.Slot, version uint64, bytesPerSec int64, moveID string) (started bool, err error) {
	return n.drop(ctx, s, version, bytesPerSec, moveID, false)
}

// drop is Drop; with strict set, moveID is the import the caller saw ("" for
// none) and any other import refuses the drop (reconciliation decided on
// what it saw, and an import that began since is a move it knows nothing of).
func (n *Node) drop(ctx context.Context, s slots.Slot, version uint64, bytesPerSec int64, moveID string, strict bool) (started bool, err error) {
	o, ok := n.cfg.Map.Owner(s)
	switch {
	case !ok:
		return false, ErrNoMap
	case o.Version < version:
		return false, fmt.Errorf("%w: map at version %d, drop of slot %d asked at %d", ErrMapBehind, o.Version, s.Int(), version)
	case o.ID == n.cfg.ID:
		return false, fmt.Errorf("%w: refusing to drop slot %d at map version %d", ErrOwned, s.Int(), o.Version)
	}
	if bytesPerSec <= 0 {
		bytesPerSec = n.cfg.DropBytesPerSecond
	}
	// Decided under the slot's lock, which imports hold too: either the
	// drop registers first (an import then gets ErrDropping and retries),
	// or an import of a newer move has begun, and then a drop asked for by
	// an earlier move would delete the new copy. That import cleared the
	// old copy already, so the drop is moot.
	smu := &n.slotMu[s.Int()]
	smu.Lock()
	n.impMu.Lock()
	imp := n.imports[s]
	n.impMu.Unlock()
	if imp != nil && (moveID != "" || strict) && imp.MoveID != moveID {
		other := imp.MoveID // the import may go on once the lock is released
		smu.Unlock()
		return false, fmt.Errorf("%w: slot %d is being imported for move %s; the copy of move %s was cleared when that import began", ErrMoveMismatch, s.Int(), other, moveID)
	}
	n.dropMu.Lock()
	if _, running := n.dropping[s]; running {
		n.dropMu.Unlock()
		smu.Unlock()
		return false, nil
	}
	n.dropping[s] = bytesPerSec
	n.dropFlag[s.Int()].Store(true)
	// Persisted so that a restart finishes the drop: the mover considers
	// it started and will not ask again.
	if err := n.state.set(slotKey(dropPrefix, s), strconv.FormatInt(bytesPerSec, 10), true); err != nil {
		delete(n.dropping, s)
		n.dropFlag[s.Int()].Store(false)
		n.dropMu.Unlock()
		smu.Unlock()
		return false, err
	}
	n.dropMu.Unlock()
	// The partial import this drop removes is forgotten under the same
	// lock, so a newer move's import cannot start in between and lose its
	// state.
	n.impMu.Lock()
	delete(n.imports, s)
	n.impMu.Unlock()
	err = n.state.delete(slotKey(importPrefix, s), !n.cfg.NoSync)
	smu.Unlock()
	if err != nil {
		return false, fmt.Errorf("node: forget import of slot %d: %w", s.Int(), err)
	}
	if err := n.EndCapture(ctx, s, ""); err != nil {
		return false, err
	}
	select {
	case n.dropWake <- struct{}{}:
	default:
	}
	n.lg.Info("slot drop started", "slot", s.Int(), "bytes_per_second", bytesPerSec)
	return true, nil
}

// Dropping reports whether slot s is still being dropped.
func (n *Node) Dropping(s slots.Slot) bool {
	n.dropMu.Lock()
	defer n.dropMu.Unlock()
	_, ok := n.dropping[s]
	return ok
}

// runDrops deletes dropped slots, one slot and one batch at a time, under a
// bytes-per-second token bucket, until ctx is done.
func (n *Node) runDrops(ctx context.Context) {
	for {
		n.dropMu.Lock()
		var s slots.Slot
		var bps int64
		found := false
		for k, v := range n.dropping {
			s, bps, found = k, v, true
			break
		}
		n.dropMu.Unlock()
		if !found {
			select {
			case <-ctx.Done():
				return
			case <-n.dropWake:
				continue
			}
		}
		if err := n.dropSlot(ctx, s, bps); err != nil {
			if ctx.Err() != nil {
				return
			}
			n.lg.Warn("slot drop failed; retrying", "slot", s.Int(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		n.dropMu.Lock()
		delete(n.dropping, s)
		n.dropFlag[s.Int()].Store(false)
		err := n.state.delete(slotKey(dropPrefix, s), true)
		n.dropMu.Unlock()
		if err != nil {
			// The slot is empty; a restart would only redo an empty drop.
			n.lg.Warn("could not record a finished drop", "slot", s.Int(), "err", err)
		}
		n.lg.Info("slot dropped", "slot", s.Int())
	}
}

func (n *Node) dropSlot(ctx context.Context, s slots.Slot, bps int64) error {
	keys, size, err := n.store.SlotSize(ctx, s)
	if err != nil {
		return err
	}
	avg := int64(64)
	if keys > 0 {
		avg = max(1, size/keys)
	}
	// Batches of about a tenth of a second of deletes.
	batch := int(max(1, min(bps/10/avg, 10000)))
	lim := rate.NewLimiter(rate.Limit(bps), int(max(bps/10, avg*int64(batch))))
	for {
		if err := lim.WaitN(ctx, batch*int(avg)); err != nil {
			return err
		}
		mu := &n.slotMu[s.Int()]
		mu.Lock()
		if !n.Dropping(s) { // an import took the slot over
			mu.Unlock()
			return nil
		}
		done, err := n.store.DeleteSlot(ctx, s, batch)
		if err == nil && done {
			err = n.setFence(s, false, FenceInfo{})
		}
		mu.Unlock()
		if err != nil || done {
			return err
		}
	}
}
