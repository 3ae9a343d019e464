package mover

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// Clean-up after a move: the source of a commit is asked to end its
// capture and drop its handed-off copy, the target of an abort to drop its
// partial copy. The leader asks for about cleanupFor and then leaves it:
// each store's reconciliation (node) drops what the directory does
// not explain, which is the guarantee. A new leader asks for nothing it
// did not see; nothing here outlives the term.

// cleanupFor is how long one clean-up is retried.
const cleanupFor = 30 * time.Second

// cleanup is one store-side clean-up.
type cleanup struct {
	addr    string
	slot    slots.Slot
	moveID  string
	version uint64 // DropSlot's version; 0 for a target's partial copy
	drop    bool   // DropSlot, else EndCapture
	until   time.Time
}

// cleaner runs clean-ups until they succeed or their time is up. Safe for
// concurrent use.
type cleaner struct {
	stores *StorePool
	lg     *slog.Logger

	mu    sync.Mutex // guards queue
	queue []cleanup
}

func newCleaner(stores *StorePool, lg *slog.Logger) *cleaner {
	return &cleaner{stores: stores, lg: lg}
}

// add queues c for the running Run, which works the queue in batches
// (a rebalance commits hundreds of moves a second; a pass per commit
// would retry every waiting drop each time).
func (cl *cleaner) add(c cleanup) {
	c.until = time.Now().Add(cleanupFor)
	cl.mu.Lock()
	cl.queue = append(cl.queue, c)
	cl.mu.Unlock()
}

// Run works the queue until ctx is done, then forgets what is left.
func (cl *cleaner) Run(ctx context.Context) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	defer func() {
		cl.mu.Lock()
		cl.queue = nil
		cl.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cl.mu.Lock()
		todo := cl.queue
		cl.queue = nil
		cl.mu.Unlock()
		var left []cleanup
		for _, c := range todo {
			err := cl.run(ctx, c)
			switch {
			case err == nil || ctx.Err() != nil:
			case time.Now().After(c.until):
				cl.lg.Warn("clean-up left to the store's reconciliation", "node", c.addr, "slot", c.slot.Int(), "move", c.moveID, "err", err)
			default:
				left = append(left, c)
			}
		}
		if len(left) > 0 {
			cl.mu.Lock()
			cl.queue = append(left, cl.queue...)
			cl.mu.Unlock()
		}
	}
}

func (cl *cleaner) run(ctx context.Context, c cleanup) error {
	st, err := cl.stores.client(c.addr)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s := uint32(c.slot.Int())
	if c.drop {
		_, err = st.DropSlot(cctx, &slotdv1.DropSlotRequest{Slot: s, Version: c.version, MoveId: c.moveID})
		if status.Code(err) == codes.FailedPrecondition {
			// The node owns the slot again, or a newer move is importing it
			// (and cleared the old copy when it began): nothing to drop.
			cl.lg.Info("drop no longer needed", "node", c.addr, "slot", c.slot.Int(), "move", c.moveID, "reason", err)
			err = nil
		}
	} else {
		_, err = st.EndCapture(cctx, &slotdv1.EndCaptureRequest{Slot: s, MoveId: c.moveID})
		if isGone(err) {
			err = nil
		}
	}
	return err
}
