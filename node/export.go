package node

import (
	"context"
	"fmt"

	"github.com/slotd/slotd/slots"
)

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

// throttledBatch caps a batch at a fiftieth of a second of the throttle's
// rate (at least minThrottledBatch). Bytes are counted a batch at a time
// (the mover's slotd_mover_bytes_moved_total when the target applied it,
// the donor's export counter when it is sent), so a 1-second window holds
// a whole number of batches: with quarter-second batches a window at
// 5 MB/s held 4 or 5 of them, 20% apart; with 20 ms batches the steps are
// 2%, and the donor's copy stays within 5% of its setting in every
// window. At 50 MB/s and up a batch is the size asked for, as before.
func (n *Node) throttledBatch(size int) int {
	if r := n.throttle.Rate(); r > 0 {
		return min(size, max(minThrottledBatch, int(min(r/batchesPerSecond, int64(size)))))
	}
	return size
}

// batchesPerSecond is how many batches a throttled export sends a second
// (fewer when a batch would fall below minThrottledBatch).
const batchesPerSecond = 50

const minThrottledBatch = 16 << 10

func batchBytes(asked int) int {
	if asked <= 0 {
		return defaultBatchBytes
	}
	return min(asked, maxBatchBytes)
}

// SetExportRate changes the export throttle while exports run; 0 is
// unlimited. It takes effect within about 20 ms.
func (n *Node) SetExportRate(bytesPerSec int64) {
	n.throttle.SetRate(bytesPerSec)
	n.m.throttle.Set(float64(max(bytesPerSec, 0)))
}

// ExportRate returns the export throttle in bytes per second, 0 if unlimited.
func (n *Node) ExportRate() int64 { return n.throttle.Rate() }
