package node

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/slotd/slotd/slots"
)

// Fenced reports whether slot s is fenced.
func (n *Node) Fenced(s slots.Slot) bool { return n.fenced[s.Int()].Load() }

func (n *Node) fencedError(s slots.Slot) error {
	n.fenceMu.Lock()
	fi := n.fences[s]
	n.fenceMu.Unlock()
	return &FencedError{Slot: s, Version: fi.Version, MoveID: fi.MoveID, RetryAfter: n.cfg.FenceRetryAfter}
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
		n.fences[s] = fi
	} else {
		delete(n.fences, s)
	}
	n.fenced[s.Int()].Store(on)
	n.m.fenced.Set(float64(len(n.fences)))
	return nil
}

func (n *Node) captureOf(s slots.Slot) *capture {
	n.capMu.Lock()
	defer n.capMu.Unlock()
	return n.captures[s]
}

// StartCapture starts recording the writes to slot s for move moveID,
// replacing any capture that runs, and returns the snapshot sequence:
// changes after it, replayed on top of a scan started after this call, give
// the slot's current state. Sequence numbers grow across captures of a slot.
func (n *Node) StartCapture(ctx context.Context, s slots.Slot, moveID string) (snapshotSeq uint64, err error) {
	if n.closed.Load() {
		return 0, ErrClosed
	}
	// Take the slot lock so no write is half-way between Apply and the log.
	mu := &n.slotMu[s.Int()]
	mu.Lock()
	defer mu.Unlock()
	n.capMu.Lock()
	defer n.capMu.Unlock()
	// Wall-clock nanoseconds keep sequences growing across captures even
	// when the old capture's log is gone; the old last sequence covers a
	// clock that went back.
	base := uint64(time.Now().UnixNano())
	if old, ok := n.captures[s]; ok {
		base = max(base, old.last()+1)
		delete(n.captures, s)
		if err := old.end(); err != nil {
			return 0, err
		}
	}
	c, err := createCapture(n.cfg.StateDir, s, moveID, base, !n.cfg.NoSync)
	if err != nil {
		return 0, err
	}
	// A node exporting a slot it owns received it, if at all, by a move
	// that is over: that import's state must go, or the drop that follows
	// this move would be taken for the late drop of an older move and
	// refused (see Drop), leaving the handed-off copy on disk for good.
	if o, ok := n.cfg.Map.Owner(s); ok && o.ID == n.cfg.ID {
		n.impMu.Lock()
		_, had := n.imports[s]
		delete(n.imports, s)
		n.impMu.Unlock()
		if had {
			if err := n.state.delete(slotKey(importPrefix, s), !n.cfg.NoSync); err != nil {
				c.end()
				return 0, err
			}
		}
	}
	if n.Fenced(s) {
		c.setFence(true)
	}
	n.captures[s] = c
	n.lg.Info("capture started", "slot", s.Int(), "move", moveID, "snapshot_seq", base)
	return base, nil
}

// EndCapture stops the capture of slot s and deletes its log. An empty
// moveID ends whatever capture runs; ending no capture is a no-op.
func (n *Node) EndCapture(ctx context.Context, s slots.Slot, moveID string) error {
	n.capMu.Lock()
	c, ok := n.captures[s]
	if !ok || (moveID != "" && c.id != moveID) {
		n.capMu.Unlock()
		return nil
	}
	delete(n.captures, s)
	n.capMu.Unlock()
	n.lg.Info("capture ended", "slot", s.Int(), "move", c.id)
	return c.end()
}

// findCapture returns the capture of slot s for moveID: ErrCaptureLost when
// none runs, ErrMoveMismatch when another move's does.
func (n *Node) findCapture(s slots.Slot, moveID string) (*capture, error) {
	c := n.captureOf(s)
	if c == nil {
		return nil, fmt.Errorf("%w: no capture of slot %d", ErrCaptureLost, s.Int())
	}
	if moveID != "" && c.id != moveID {
		return nil, fmt.Errorf("%w: slot %d is captured for move %q, not %q", ErrMoveMismatch, s.Int(), c.id, moveID)
	}
	return c, nil
}

// ExportBatch is one batch of a slot's snapshot.
type ExportBatch struct {
	Entries     []Entry
	Cursor      []byte // pass to Export to continue after this batch
	SnapshotSeq uint64
	Done        bool // the scan reached the end of the slot
}

// Export returns the batch of slot s after cursor, with about maxBytes of
// keys and values (0: 256 KiB; at most 2 MiB), after waiting for the export
// throttle. A nil cursor (re)starts the change capture for moveID; any other
// cursor needs that capture still running (ErrCaptureLost, ErrMoveMismatch
// otherwise).
//
// A cursor is 0x01 followed by the store's own cursor, so that the cursor of
// a first batch that came back empty is still not empty.
func (n *Node) Export(ctx context.Context, s slots.Slot, moveID string, cursor []byte, maxBytes int) (ExportBatch, error) {
	var b ExportBatch
	var storeCursor []byte
	if len(cursor) == 0 {
		seq, err := n.StartCapture(ctx, s, moveID)
		if err != nil {
			return b, err
		}
		b.SnapshotSeq = seq
	} else {
		if cursor[0] != 1 {
			return b, fmt.Errorf("%w: export cursor of slot %d is not one this node made", ErrCaptureLost, s.Int())
		}
		c, err := n.findCapture(s, moveID)
		if err != nil {
			return b, err
		}
		b.SnapshotSeq = c.base
		if len(cursor) > 1 {
			storeCursor = cursor[1:]
		}
	}
	maxBytes = n.throttledBatch(batchBytes(maxBytes))
	entries, next, err := n.store.Scan(ctx, s, storeCursor, maxBytes)
	if err != nil {
		return b, fmt.Errorf("node: scan slot %d: %w", s.Int(), err)
	}
	size := 0
	for _, e := range entries {
		size += len(e.Key) + len(e.Value)
	}
	if err := n.throttle.Wait(ctx, size); err != nil {
		return b, err
	}
	n.m.exportBytes.Add(float64(size))
	b.Entries = entries
	b.Done = next == nil
	if next == nil {
		next = storeCursor
		if len(entries) > 0 {
			next = entries[len(entries)-1].Key
		}
	}
	b.Cursor = append([]byte{1}, next...)
	return b, nil
}

// Batch sizes: the default, and a cap that keeps a batch (plus one large
// entry) inside gRPC's default 4 MiB message limit on the receiving side.
//
// The default is 1 MiB: with a durable target every batch costs the
// store's commit fsync, and 256 KiB batches made a durable copy of 20 MB
// spend most of its time in 80 of them (make bench-compare, item 2).
const (
	defaultBatchBytes = 1 << 20
	maxBatchBytes     = 2 << 20
)

// throttledBatch caps a batch at a quarter second of the throttle's rate
// (at least minThrottledBatch): at a low rate a 1 MiB batch would be
// waited for in one piece, so progress and the rate seen per second would
// move in jumps of seconds.
func (n *Node) throttledBatch(size int) int {
	if r := n.throttle.Rate(); r > 0 {
		return min(size, max(minThrottledBatch, int(min(r/4, int64(size)))))
	}
	return size
}

const minThrottledBatch = 16 << 10

func batchBytes(asked int) int {
	if asked <= 0 {
		return defaultBatchBytes
	}
	return min(asked, maxBatchBytes)
}

// ChangeBatch is a run of captured changes.
type ChangeBatch struct {
	Changes  []Change // shared with the capture: do not modify
	HighSeq  uint64   // newest sequence captured when the batch was taken
	FenceSeq uint64   // non-zero once the slot is fenced
}

// Changes returns the changes of slot s's capture for moveID after sequence
// after, about maxBytes of them (0: 256 KiB; at most 2 MiB), counted against
// the export throttle. With wait set it blocks until there is a change or the slot is
// fenced (then the batch may be empty), or ctx is done. It returns
// ErrCaptureLost when the capture or those changes are gone.
func (n *Node) Changes(ctx context.Context, s slots.Slot, moveID string, after uint64, maxBytes int, wait bool) (ChangeBatch, error) {
	c, err := n.findCapture(s, moveID)
	if err != nil {
		return ChangeBatch{}, err
	}
	maxBytes = n.throttledBatch(batchBytes(maxBytes))
	if wait {
		if err := c.wait(ctx, after); err != nil {
			return ChangeBatch{}, err
		}
	}
	out, high, fence, err := c.since(after, maxBytes)
	if err != nil {
		return ChangeBatch{}, err
	}
	size := 0
	for _, ch := range out {
		size += len(ch.Key) + len(ch.Value)
	}
	if err := n.throttle.Wait(ctx, size); err != nil {
		return ChangeBatch{}, err
	}
	n.m.exportBytes.Add(float64(size))
	return ChangeBatch{Changes: out, HighSeq: high, FenceSeq: fence}, nil
}

// SetExportRate changes the export throttle while exports run; 0 is
// unlimited. It takes effect within about 200 ms.
func (n *Node) SetExportRate(bytesPerSec int64) {
	n.throttle.SetRate(bytesPerSec)
	n.m.throttle.Set(float64(max(bytesPerSec, 0)))
}

// ExportRate returns the export throttle in bytes per second, 0 if unlimited.
func (n *Node) ExportRate() int64 { return n.throttle.Rate() }

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
}

func importPath(dir string, s slots.Slot) string {
	return filepath.Join(dir, "import-"+strconv.Itoa(s.Int())+".json")
}

func loadImports(dir string) (map[slots.Slot]*ImportState, error) {
	names, err := filepath.Glob(filepath.Join(dir, "import-*.json"))
	if err != nil {
		return nil, fmt.Errorf("node: list imports: %w", err)
	}
	out := make(map[slots.Slot]*ImportState)
	for _, name := range names {
		num := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), "import-"), ".json")
		k, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		s, err := slots.New(k)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("node: read import state: %w", err)
		}
		var st ImportState
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("node: import state %s is corrupt (drop the slot's partial copy and remove it): %w", name, err)
		}
		out[s] = &st
	}
	return out, nil
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
		return fmt.Errorf("%w: refusing to import into slot %d at map version %d", ErrOwned, s.Int(), o.Version)
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
	*cur = next
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
	*cur = next
	n.m.importBytes.Add(float64(size))
	return next, false, nil
}

// SlotStats describes one slot on this node.
type SlotStats struct {
	Slot            slots.Slot
	Keys, Bytes     int64
	WritesPerSecond float64 // over the last stats window
	Owned           bool
	Fenced          bool
	Capturing       bool
	Dropping        bool
}

// MapVersion returns the version of the node's slot map, 0 before one.
func (n *Node) MapVersion() uint64 {
	o, _ := n.cfg.Map.Owner(slots.Slot{})
	return o.Version
}

// Stats reports on slot s.
func (n *Node) Stats(ctx context.Context, s slots.Slot) (SlotStats, error) {
	keys, size, err := n.store.SlotSize(ctx, s)
	if err != nil {
		return SlotStats{}, fmt.Errorf("node: size of slot %d: %w", s.Int(), err)
	}
	st := SlotStats{Slot: s, Keys: keys, Bytes: size, Fenced: n.Fenced(s), Capturing: n.captureOf(s) != nil}
	n.rateMu.Lock()
	st.WritesPerSecond = float64(n.lastRate[s.Int()])
	n.rateMu.Unlock()
	if o, ok := n.cfg.Map.Owner(s); ok {
		st.Owned = o.ID == n.cfg.ID
	}
	n.dropMu.Lock()
	_, st.Dropping = n.dropping[s]
	n.dropMu.Unlock()
	return st, nil
}

// Checksum is a digest of a slot's contents: equal on two nodes exactly when
// they hold the same keys with the same values, byte for byte.
type Checksum struct {
	Keys, Bytes int64
	// SHA256 over the entries in key order, each framed as
	// uint32be(len(key)) || key || uint32be(len(value)) || value.
	SHA256  [32]byte
	HighSeq uint64 // newest captured change when the digest was taken
}

// Checksum scans slot s and digests it. It is not throttled: run it on a
// fenced or idle slot, or accept that it reads the whole slot.
func (n *Node) Checksum(ctx context.Context, s slots.Slot) (Checksum, error) {
	var sum Checksum
	if c := n.captureOf(s); c != nil {
		sum.HighSeq = c.last()
	}
	h := sha256.New()
	var cursor, buf []byte
	for {
		entries, next, err := n.store.Scan(ctx, s, cursor, 1<<20)
		if err != nil {
			return Checksum{}, fmt.Errorf("node: checksum slot %d: %w", s.Int(), err)
		}
		for _, e := range entries {
			buf = binary.BigEndian.AppendUint32(buf[:0], uint32(len(e.Key)))
			buf = append(buf, e.Key...)
			buf = binary.BigEndian.AppendUint32(buf, uint32(len(e.Value)))
			buf = append(buf, e.Value...)
			h.Write(buf)
			sum.Keys++
			sum.Bytes += int64(len(e.Key) + len(e.Value))
		}
		if next == nil {
			break
		}
		cursor = next
	}
	h.Sum(sum.SHA256[:0])
	return sum, nil
}

// Drop deletes slot s's data in the background at bytesPerSec (0: the
// configured default), ends its capture, forgets its import state, and lifts
// its fence once the slot is empty. version is the directory version that
// committed the slot away from this node: Drop returns ErrMapBehind until the
// node's map has reached it. Drop refuses a slot this node owns (ErrOwned).
// started is false when a drop of the slot was already running.
func (n *Node) Drop(ctx context.Context, s slots.Slot, version uint64, bytesPerSec int64, moveID string) (started bool, err error) {
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
	if imp != nil && moveID != "" && imp.MoveID != moveID {
		smu.Unlock()
		return false, fmt.Errorf("%w: slot %d is being imported for move %s; the copy of move %s was cleared when that import began", ErrMoveMismatch, s.Int(), imp.MoveID, moveID)
	}
	n.dropMu.Lock()
	if _, running := n.dropping[s]; running {
		n.dropMu.Unlock()
		smu.Unlock()
		return false, nil
	}
	n.dropping[s] = bytesPerSec
	// Persisted so that a restart finishes the drop: the mover considers
	// it started and will not ask again.
	if err := n.state.set(slotKey(dropPrefix, s), strconv.FormatInt(bytesPerSec, 10), true); err != nil {
		delete(n.dropping, s)
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

// dropFile held the drops in progress, one "slot bytes_per_second" line
// each, before the state log; it is read once to move it into the log.
const dropFile = "drops"

func loadDrops(dir string) (map[slots.Slot]int64, error) {
	out := make(map[slots.Slot]int64)
	b, err := os.ReadFile(filepath.Join(dir, dropFile))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node: read drops: %w", err)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var k int
		var r int64
		var s slots.Slot
		if len(f) == 2 {
			k, err = strconv.Atoi(f[0])
			if err == nil {
				r, err = strconv.ParseInt(f[1], 10, 64)
			}
			if err == nil {
				s, err = slots.New(k)
			}
		}
		if len(f) != 2 || err != nil || r <= 0 {
			return nil, fmt.Errorf("node: drop file %s line %d is corrupt; remove it and drop the slots again", filepath.Join(dir, dropFile), i+1)
		}
		out[s] = r
	}
	return out, nil
}
