package node

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/slotd/slotd/slots"
)

// ImportState is how far the target of a move got. It is persisted after
// every batch, so a restarted mover (or target) resumes where it stopped.
type ImportState struct {
	MoveID        string
	LastBatchSeq  uint64
	Cursor        []byte // the source's cursor after the last snapshot batch
	SnapshotSeq   uint64
	SnapshotDone  bool
	LastChangeSeq uint64
}

// SnapshotBatch is an Export batch forwarded to the target, numbered by the
// mover 1, 2, 3... per move.
type SnapshotBatch struct {
	BatchSeq    uint64
	Entries     []Entry
	Cursor      []byte
	SnapshotSeq uint64
	Done        bool
	// AfterPrevious says the mover sent this batch before the previous
	// one was acknowledged: while the previous is not applied yet (its
	// BatchSeq is the next expected), this one waits for it instead of
	// failing with ErrImportOrder.
	AfterPrevious bool
}

// importState returns the slot's import state for moveID, starting a fresh
// one when the slot had none or another move's. The caller holds slotMu[s].
func (n *Node) importState(s slots.Slot, moveID string) *ImportState {
	n.impMu.Lock()
	defer n.impMu.Unlock()
	st := n.imports[s]
	if st == nil || st.MoveID != moveID {
		st = &ImportState{MoveID: moveID}
		n.imports[s] = st
	}
	return st
}

// setImport makes next the slot's import state cur. The caller holds
// slotMu[s], as every writer does; readers that hold only impMu
// (ImportStatus, reconciliation, Drop) read the state under it, so the
// write takes it too.
func (n *Node) setImport(s slots.Slot, cur *ImportState, next ImportState) {
	n.impMu.Lock()
	*cur = next
	if ch := n.importWake[s]; ch != nil {
		close(ch)
		delete(n.importWake, s)
	}
	n.impMu.Unlock()
}

// importChanged returns a channel closed at slot s's next import state
// change. The caller holds slotMu[s], so no change is missed between its
// look at the state and the wait.
func (n *Node) importChanged(s slots.Slot) <-chan struct{} {
	n.impMu.Lock()
	defer n.impMu.Unlock()
	ch := n.importWake[s]
	if ch == nil {
		ch = make(chan struct{})
		n.importWake[s] = ch
	}
	return ch
}

// saveImport records how far an import got, after the store applied the
// batch. It is not synced: the record only saves work on a resume. Lost in
// a crash, it is older than the data, and the import resumes from an
// earlier batch or change, which replays idempotently (batches are full
// values, changes full values in order). It never gets ahead of data the
// store has made durable, because it is written after Apply returned. An
// fdatasync per batch here cost a third of the fsyncs of a durable copy.
func (n *Node) saveImport(s slots.Slot, st *ImportState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("node: encode import state: %w", err)
	}
	return n.state.set(slotKey(importPrefix, s), string(b), false)
}

// ImportStatus returns how far imports of slot s for moveID got; the zero
// state when nothing was imported for that move.
func (n *Node) ImportStatus(s slots.Slot, moveID string) ImportState {
	n.impMu.Lock()
	defer n.impMu.Unlock()
	if st := n.imports[s]; st != nil && st.MoveID == moveID {
		return *st
	}
	return ImportState{MoveID: moveID}
}

func (n *Node) checkImport(s slots.Slot, keys func(yield func([]byte) bool)) error {
	if o, ok := n.cfg.Map.Owner(s); ok && o.ID == n.cfg.ID {
		// Refused, and retryable: a mover begins a move only to a node
		// the directory says does not own the slot, so this node's map is
		// most likely behind (a slot moved away from it and straight
		// back, as a rollback does). The import is refused either way;
		// the mover tries again once the map has caught up.
		return fmt.Errorf("%w: refusing to import into slot %d, which this node's map (version %d) gives to it (%w)", ErrOwned, s.Int(), o.Version, ErrMapBehind)
	}
	for k := range keys {
		if len(k) == 0 {
			return fmt.Errorf("%w: empty key in import for slot %d", ErrImportOrder, s.Int())
		}
		if slots.ForKey(k) != s {
			return fmt.Errorf("%w: key %q is in slot %d, import was for slot %d", ErrWrongSlot, k, slots.ForKey(k).Int(), s.Int())
		}
	}
	return nil
}

// cancelDrop forgets a running drop of slot s. The caller holds
// slotMu[s] and clears the slot itself.
func (n *Node) cancelDrop(s slots.Slot) error {
	n.dropMu.Lock()
	defer n.dropMu.Unlock()
	delete(n.dropping, s)
	n.dropFlag[s.Int()].Store(false)
	if err := n.state.delete(slotKey(dropPrefix, s), true); err != nil {
		return fmt.Errorf("node: cancel drop of slot %d: %w", s.Int(), err)
	}
	n.lg.Info("slot drop taken over by an import", "slot", s.Int())
	return nil
}

// clearSlot deletes every key of slot s from the store, unthrottled: it
// runs only for stale data, under the slot's lock, before an import.
func (n *Node) clearSlot(ctx context.Context, s slots.Slot) error {
	for {
		done, err := n.store.DeleteSlot(ctx, s, 10_000)
		if err != nil {
			return fmt.Errorf("node: clear stale data of slot %d before import: %w", s.Int(), err)
		}
		if done {
			return nil
		}
	}
}

// ImportSnapshot applies a snapshot batch on the target of a move. A batch
// whose BatchSeq was already applied is skipped (duplicate true); a gap, or
// a snapshot batch after changes were applied, is ErrImportOrder. It refuses
// a slot this node owns (ErrOwned): overwriting live data would lose writes.
func (n *Node) ImportSnapshot(ctx context.Context, s slots.Slot, moveID string, b SnapshotBatch) (st ImportState, duplicate bool, err error) {
	err = n.checkImport(s, func(yield func([]byte) bool) {
		for _, e := range b.Entries {
			if !yield(e.Key) {
				return
			}
		}
	})
	if err != nil {
		return st, false, err
	}
	mu := &n.slotMu[s.Int()]
	mu.Lock()
	defer mu.Unlock()
	cur := n.importState(s, moveID)
	// A batch sent while its predecessor is still on its way or being
	// applied waits for it: the mover keeps two imports in flight, so
	// that this one's transfer and decoding overlap the other's commit.
	for b.AfterPrevious && b.BatchSeq == cur.LastBatchSeq+2 && cur.LastChangeSeq == 0 {
		wake := n.importChanged(s)
		mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			mu.Lock()
			return *cur, false, fmt.Errorf("node: import batch %d of slot %d waiting for batch %d: %w", b.BatchSeq, s.Int(), b.BatchSeq-1, ctx.Err())
		}
		mu.Lock()
		cur = n.importState(s, moveID)
	}
	if n.Dropping(s) {
		if cur.LastBatchSeq != 0 {
			// Dropped under a running import: the mover aborted it.
			return *cur, false, fmt.Errorf("%w: slot %d", ErrDropping, s.Int())
		}
		// A new move's first batch: it clears the slot itself below, so
		// the running drop of an older copy stops (dropSlot checks under
		// this lock before every batch) instead of making it wait.
		if err := n.cancelDrop(s); err != nil {
			return *cur, false, err
		}
	}
	switch {
	case b.BatchSeq <= cur.LastBatchSeq:
		return *cur, true, nil
	case cur.LastChangeSeq != 0:
		return *cur, false, fmt.Errorf("%w: snapshot batch %d of slot %d after changes up to %d", ErrImportOrder, b.BatchSeq, s.Int(), cur.LastChangeSeq)
	case b.BatchSeq != cur.LastBatchSeq+1:
		return *cur, false, fmt.Errorf("%w: snapshot batch %d of slot %d, expected %d", ErrImportOrder, b.BatchSeq, s.Int(), cur.LastBatchSeq+1)
	}
	// The first batch of a move: whatever this node still holds of the slot
	// (it does not own it, as checkImport made sure) is a copy it handed off
	// and has not dropped yet, or a partial copy of an aborted move. Keeping
	// it would bring back keys deleted since; dropping it later would delete
	// what this import brings. So it goes now, before the first key lands.
	if cur.LastBatchSeq == 0 {
		if err := n.clearSlot(ctx, s); err != nil {
			return *cur, false, err
		}
	}
	// A fence left from when this node handed the slot off is stale now
	// that the slot comes back: lift it, so the node takes writes once the
	// directory commits it as owner. Until then the ownership check (this
	// node does not own the slot, as checkImport made sure) keeps writes out.
	if n.Fenced(s) {
		if err := n.setFence(s, false, FenceInfo{}); err != nil {
			return *cur, false, err
		}
		n.lg.Info("stale fence lifted by import", "slot", s.Int(), "move", moveID)
	}
	batch := make([]Mutation, len(b.Entries))
	size := 0
	for i, e := range b.Entries {
		batch[i] = Mutation{Key: e.Key, Value: e.Value}
		size += len(e.Key) + len(e.Value)
	}
	if len(batch) > 0 {
		if err := n.store.Apply(ctx, s, batch); err != nil {
			return *cur, false, fmt.Errorf("node: import into slot %d: %w", s.Int(), err)
		}
	}
	next := *cur
	next.LastBatchSeq, next.Cursor, next.SnapshotSeq, next.SnapshotDone = b.BatchSeq, b.Cursor, b.SnapshotSeq, b.Done
	if err := n.saveImport(s, &next); err != nil {
		return *cur, false, err
	}
	n.setImport(s, cur, next)
	n.m.importBytes.Add(float64(size))
	return next, false, nil
}

// ImportChanges replays captured changes on the target, after the snapshot
// is complete. Changes at or below the last applied sequence are skipped
// (duplicate true when all were); the first new one must follow it without
// a gap (ErrImportOrder otherwise).
func (n *Node) ImportChanges(ctx context.Context, s slots.Slot, moveID string, changes []Change) (st ImportState, duplicate bool, err error) {
	err = n.checkImport(s, func(yield func([]byte) bool) {
		for _, c := range changes {
			if !yield(c.Key) {
				return
			}
		}
	})
	if err != nil {
		return st, false, err
	}
	mu := &n.slotMu[s.Int()]
	mu.Lock()
	defer mu.Unlock()
	if n.Dropping(s) {
		return ImportState{MoveID: moveID}, false, fmt.Errorf("%w: slot %d", ErrDropping, s.Int())
	}
	cur := n.importState(s, moveID)
	if !cur.SnapshotDone {
		return *cur, false, fmt.Errorf("%w: changes for slot %d before its snapshot is complete", ErrImportOrder, s.Int())
	}
	last := max(cur.LastChangeSeq, cur.SnapshotSeq)
	i := 0
	for i < len(changes) && changes[i].Seq <= last {
		i++
	}
	fresh := changes[i:]
	if len(fresh) == 0 {
		return *cur, len(changes) > 0, nil
	}
	batch := make([]Mutation, len(fresh))
	size := 0
	for j, c := range fresh {
		if c.Seq != last+uint64(j)+1 {
			return *cur, false, fmt.Errorf("%w: change %d of slot %d, expected %d", ErrImportOrder, c.Seq, s.Int(), last+uint64(j)+1)
		}
		batch[j] = c.Mutation
		size += len(c.Key) + len(c.Value)
	}
	if err := n.store.Apply(ctx, s, batch); err != nil {
		return *cur, false, fmt.Errorf("node: import into slot %d: %w", s.Int(), err)
	}
	next := *cur
	next.LastChangeSeq = fresh[len(fresh)-1].Seq
	if err := n.saveImport(s, &next); err != nil {
		return *cur, false, err
	}
	n.setImport(s, cur, next)
	n.m.importBytes.Add(float64(size))
	return next, false, nil
}
