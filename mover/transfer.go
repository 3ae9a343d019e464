package mover

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"sync"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// Errors a transfer returns; the executor branches on them.
var (
	// ErrStoreLied marks data from a store that cannot be right: a key of
	// another slot, a checksum that differs after the drain. The move is
	// aborted and not retried.
	ErrStoreLied = errors.New("mover: store sent inconsistent data")
	// ErrCaptureLost marks a source that lost the change capture the copy
	// relies on (it restarted without it, or the log was cut): the move is
	// aborted and may be retried from scratch.
	ErrCaptureLost = errors.New("mover: source lost the slot's change capture")
)

// journal records a move's progress in the directory. The executor
// implements it over the directory; each call is one etcd transaction.
type journal interface {
	// CatchingUp records that the copy is done and catch-up starts. It is
	// informational (status shows it); recovery treats it like the copy.
	CatchingUp(ctx context.Context) error
	// Fencing is called before the source is fenced: from here the move
	// must be finished or the source unfenced. The executor's journal
	// keeps that in memory; its Commit records the fence.
	Fencing(ctx context.Context) error
	// Commit names the target as the slot's owner, recording what res
	// copied in the same transaction, and returns the new directory
	// version. It is called only with the source fenced and drained.
	Commit(ctx context.Context, res transferResult) (uint64, error)
}

// transferStep names where a transfer starts: a fresh move, or a move a
// previous leader left at some phase.
type transferStep int

// Steps, in order.
const (
	stepCopy transferStep = iota
	stepCatchUp
	stepFenced
)

// slotTransfer moves one slot's data from a source store node to a target
// and hands ownership over by the single-slot move protocol: copy,
// catch-up, fence, drain, verify, commit. A slotTransfer is used once.
type slotTransfer struct {
	Slot   slots.Slot
	MoveID string
	Source slotdv1.StoreClient
	Target slotdv1.StoreClient
	// Rate is the donor byte rate for this move (0: unlimited).
	Rate uint64
	// Journal records phases in the directory.
	Journal journal
	// Verify compares source and target checksums after the drain, inside
	// the fence. It costs a scan of the slot on both sides.
	Verify bool
	// CatchUpBacklog is the backlog of changes below which catch-up stops
	// and the source is fenced; default 64.
	CatchUpBacklog uint64
	// MaxCatchUpRounds bounds catch-up when writes outpace the copy; the
	// source is fenced after it anyway. Default 20.
	MaxCatchUpRounds int
	// MaxBatchBytes bounds one batch; 0 lets the source choose.
	MaxBatchBytes uint32
	// Progress, if set, is called after every batch applied on the target
	// with the bytes and keys of that batch.
	Progress func(bytes, keys int)
	// Fenced, if set, is called when the source is fenced; Committed's
	// caller measures the cutover pause from it.
	Fenced func()
	// Copied, if set, is called when the snapshot copy is over (or was
	// already), before catch-up: the scheduler then lets the donor's next
	// copy start.
	Copied func()
	// Fresh says the move was just begun, so the target holds nothing of it
	// and asking it where to resume would be a wasted round trip.
	Fresh bool
	// FenceBeside fences the source while a snapshot of one small batch
	// is imported (fenceBeside): the move is one round trip shorter, its
	// write pause holds the import.
	FenceBeside bool

	batchSeq   uint64 // last snapshot batch applied on the target
	lastChange uint64 // last change seq applied on the target
	oneBatch   bool   // this Run copied the whole snapshot in one batch
	// fence, when the copy fenced the source beside its only import
	// (fenceBeside), yields that Fence's answer, once.
	fence chan fenceAnswer
	// runCtx is Run's context: the copy's own ends with the copy, and a
	// Fence started beside its import must outlive it.
	runCtx context.Context
}

// fenceAnswer is a Fence call's outcome.
type fenceAnswer struct {
	resp *slotdv1.FenceResponse
	err  error
}

// fenceBesideBytes bounds the snapshot of one batch whose import runs
// beside the source's fence: the write pause (fence to commit) then holds
// that import, which must stay short.
const fenceBesideBytes = 64 << 10

// fenceBeside starts fencing the source while the only batch of the
// snapshot (from the start, done, at most fenceBesideBytes) is imported:
// the Fence and the Import go to different stores, and an empty slot's
// move then waits for one of them instead of both. The writes the fence
// stops are captured and drained after the import, as after any fence;
// the journal hears of the fence first (Fencing), so that an import that
// fails unfences the source. Run waits for the Fence in every case.
func (t *slotTransfer) fenceBeside(ctx context.Context) error {
	if err := t.Journal.Fencing(ctx); err != nil {
		return fmt.Errorf("record fencing: %w", err)
	}
	t.fence = make(chan fenceAnswer, 1)
	go func() {
		resp, err := t.Source.Fence(t.runCtx, &slotdv1.FenceRequest{Slot: t.slot(), MoveId: t.MoveID})
		if err == nil && t.Fenced != nil {
			t.Fenced() // the pause is timed from here, the import still running
		}
		t.fence <- fenceAnswer{resp, err}
	}()
	return nil
}

// oneSmallBatch reports whether the copy fences the source beside the
// import of batch seq (done or not, of size bytes) of a copy from cursor:
// asked to (FenceBeside), and the batch is the whole snapshot, small.
func (t *slotTransfer) oneSmallBatch(cursor []byte, seq uint64, done bool, bytes int) bool {
	return t.FenceBeside && len(cursor) == 0 && seq == 1 && done && bytes <= fenceBesideBytes
}

// transferResult is what a finished transfer did.
type transferResult struct {
	Version uint64 // directory version of the commit
	Bytes   int64  // key and value bytes applied on the target
	Keys    int64
}

// Run carries the transfer from step to commit. On error nothing is
// committed; the caller aborts the move (see abortOnStores) or retries Run from the
// phase the journal recorded.
func (t *slotTransfer) Run(ctx context.Context, from transferStep) (transferResult, error) {
	var res transferResult
	if t.CatchUpBacklog == 0 {
		t.CatchUpBacklog = 64
	}
	if t.MaxCatchUpRounds == 0 {
		t.MaxCatchUpRounds = 20
	}
	t.runCtx = ctx
	defer func() {
		if t.fence != nil {
			<-t.fence // never a Fence left in flight behind an error
		}
	}()
	st := &slotdv1.ImportStatusResponse{}
	if !t.Fresh || from != stepCopy {
		var err error
		st, err = t.Target.ImportStatus(ctx, &slotdv1.ImportStatusRequest{Slot: t.slot(), MoveId: t.MoveID})
		if err != nil {
			return res, fmt.Errorf("import status on target: %w", err)
		}
	}
	t.batchSeq, t.lastChange = st.LastBatchSeq, max(st.LastChangeSeq, st.SnapshotSeq)
	if from == stepCopy && !st.SnapshotDone {
		if err := t.copy(ctx, st.Cursor, &res); err != nil {
			return res, err
		}
	}
	if t.Copied != nil {
		t.Copied()
	}
	if from <= stepCatchUp {
		// A copy of one batch took about a round trip: the writes it
		// missed are few, and the drain under the fence takes them. A
		// round of catch-up first would cost one more RPC for nothing (an
		// empty slot's move: Export, Import, Fence, commit).
		if !t.oneBatch {
			if err := t.catchUp(ctx, &res); err != nil {
				return res, err
			}
		}
		if t.fence == nil {
			if err := t.Journal.Fencing(ctx); err != nil {
				return res, fmt.Errorf("record fencing: %w", err)
			}
		}
	}
	var fence *slotdv1.FenceResponse
	var err error
	if t.fence != nil {
		a := <-t.fence // Fenced was called when it answered
		t.fence = nil
		fence, err = a.resp, a.err
	} else if fence, err = t.Source.Fence(ctx, &slotdv1.FenceRequest{Slot: t.slot(), MoveId: t.MoveID}); err == nil && t.Fenced != nil {
		t.Fenced()
	}
	if err != nil {
		return res, fmt.Errorf("fence source: %w", err)
	}
	for t.lastChange < fence.FenceSeq {
		before := t.lastChange
		if _, err := t.changes(ctx, &res); err != nil {
			return res, fmt.Errorf("drain after fence: %w", err)
		}
		if t.lastChange == before {
			return res, fmt.Errorf("%w: source fenced at change %d but its log ends at %d", ErrCaptureLost, fence.FenceSeq, before)
		}
	}
	if r := fence.GetRates(); r != nil {
		// The slot's load goes with it: the target's averages of it start
		// from the source's. Only load figures: a target that fails this
		// (or an older one, which ignores it) still takes the slot.
		_, _ = t.Target.Import(ctx, &slotdv1.ImportRequest{
			Slot: t.slot(), MoveId: t.MoveID, Rates: r,
			Batch: &slotdv1.ImportRequest_Changes{Changes: &slotdv1.ChangeImport{}},
		})
	}
	if t.Verify {
		if err := t.verify(ctx); err != nil {
			return res, err
		}
	}
	// A mover stopped since the fence (leadership lost, the move
	// cancelled) leaves the commit to whoever resumes the move: the
	// directory would finish a write begun with a done context.
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("commit: %w", err)
	}
	v, err := t.Journal.Commit(ctx, res)
	if err != nil {
		return res, fmt.Errorf("commit: %w", err)
	}
	res.Version = v
	return res, nil
}

func (t *slotTransfer) slot() uint32 { return uint32(t.Slot.Int()) }

// wireRate is a donor rate (0: unlimited) as an ExportRequest carries it,
// where 0 leaves the node's rate unchanged and unlimited is said
// explicitly: a donor idle when the operator lifted the throttle still
// holds the last limit it was given.
func wireRate(bps uint64) uint64 {
	if bps == 0 {
		return slotdv1.RateUnlimited
	}
	return bps
}

// copy streams the snapshot from the source's cursor (nil: from the start)
// and applies every batch on the target: relayed as bytes (relay.go) when
// both clients are a StorePool's, else decoded and encoded again.
// Receiving (and checking) the next batch overlaps with importing the
// current one: the source's scan, this process and the target's apply
// then run at once instead of in turn.
func (t *slotTransfer) copy(ctx context.Context, cursor []byte, res *transferResult) error {
	if src, ok := t.Source.(relayConn); ok {
		if dst, ok := t.Target.(relayConn); ok {
			return t.relayCopy(ctx, src.conn(), dst.conn(), cursor, res)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := t.Source.Export(ctx, &slotdv1.ExportRequest{
		Slot: t.slot(), MoveId: t.MoveID, Cursor: cursor,
		RateBytesPerSecond: wireRate(t.Rate), MaxBatchBytes: t.MaxBatchBytes,
	})
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	batches := make(chan *slotdv1.ExportBatch, 2)
	var recvErr error // set before batches is closed
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(batches)
		for {
			b, err := stream.Recv()
			switch {
			case err == io.EOF:
				recvErr = fmt.Errorf("%w: export of slot %d ended without its last batch", ErrCaptureLost, t.Slot.Int())
				return
			case err != nil:
				recvErr = classify("export", err)
				return
			}
			if err := t.checkKeys(b.Entries, nil); err != nil {
				recvErr = err
				return
			}
			select {
			case batches <- b:
			case <-ctx.Done():
				return
			}
			if b.Done {
				return
			}
		}
	}()
	// On any return the receiver is stopped and waited for.
	defer func() { cancel(); wg.Wait() }()
	for b := range batches {
		t.batchSeq++
		if t.oneSmallBatch(cursor, t.batchSeq, b.Done, entryBytes(b.Entries)) {
			if err := t.fenceBeside(ctx); err != nil {
				return err
			}
		}
		if _, err := t.Target.Import(ctx, &slotdv1.ImportRequest{
			Slot: t.slot(), MoveId: t.MoveID,
			Batch: &slotdv1.ImportRequest_Snapshot{Snapshot: &slotdv1.SnapshotImport{
				BatchSeq: t.batchSeq, Entries: b.Entries, Cursor: b.Cursor, SnapshotSeq: b.SnapshotSeq, Done: b.Done,
			}},
		}); err != nil {
			return classify("import snapshot batch", err)
		}
		t.lastChange = max(t.lastChange, b.SnapshotSeq)
		t.account(res, entryBytes(b.Entries), len(b.Entries))
		if b.Done {
			t.oneBatch = len(cursor) == 0 && t.batchSeq == 1
			return nil
		}
	}
	wg.Wait()
	return recvErr
}

// catchUp replays rounds of changes until the backlog left after a round is
// small, or the rounds run out (writes outpacing the copy): the drain after
// the fence takes the rest.
func (t *slotTransfer) catchUp(ctx context.Context, res *transferResult) error {
	for round := 0; round < t.MaxCatchUpRounds; round++ {
		high, err := t.changes(ctx, res)
		if err != nil {
			return fmt.Errorf("catch-up: %w", err)
		}
		if high <= t.lastChange+t.CatchUpBacklog {
			return nil
		}
		if round == 0 {
			// Worth a transaction only when one round was not enough.
			if err := t.Journal.CatchingUp(ctx); err != nil {
				return fmt.Errorf("record catch-up: %w", err)
			}
		}
	}
	return nil
}

// changes replays one round of the source's captured changes: everything
// captured when the call started. It returns the newest change sequence the
// source reported.
func (t *slotTransfer) changes(ctx context.Context, res *transferResult) (high uint64, err error) {
	stream, err := t.Source.Changes(ctx, &slotdv1.ChangesRequest{
		Slot: t.slot(), MoveId: t.MoveID, AfterSeq: t.lastChange, MaxBatchBytes: t.MaxBatchBytes,
	})
	if err != nil {
		return 0, classify("changes", err)
	}
	for {
		b, err := stream.Recv()
		if err == io.EOF {
			return high, nil
		}
		if err != nil {
			return 0, classify("changes", err)
		}
		high = max(high, b.HighSeq)
		if len(b.Changes) == 0 {
			continue
		}
		if err := t.checkKeys(nil, b.Changes); err != nil {
			return 0, err
		}
		if b.Changes[0].Seq <= t.lastChange {
			return 0, fmt.Errorf("%w: change %d replayed after %d", ErrStoreLied, b.Changes[0].Seq, t.lastChange)
		}
		if _, err := t.Target.Import(ctx, &slotdv1.ImportRequest{
			Slot: t.slot(), MoveId: t.MoveID,
			Batch: &slotdv1.ImportRequest_Changes{Changes: &slotdv1.ChangeImport{Changes: b.Changes}},
		}); err != nil {
			return 0, classify("import changes", err)
		}
		t.lastChange = b.Changes[len(b.Changes)-1].Seq
		n := 0
		for _, c := range b.Changes {
			n += len(c.Key) + len(c.Value)
		}
		t.account(res, n, len(b.Changes))
	}
}

// checkKeys refuses a batch holding a key of another slot: a store that
// sends one is broken or hostile, and importing it would plant data the
// target does not own.
func (t *slotTransfer) checkKeys(entries []*slotdv1.Entry, changes []*slotdv1.Change) error {
	for _, e := range entries {
		if s := slots.ForKey(e.Key); s != t.Slot {
			return fmt.Errorf("%w: export of slot %d carried key %q of slot %d", ErrStoreLied, t.Slot.Int(), e.Key, s.Int())
		}
	}
	for _, c := range changes {
		if s := slots.ForKey(c.Key); s != t.Slot {
			return fmt.Errorf("%w: changes of slot %d carried key %q of slot %d", ErrStoreLied, t.Slot.Int(), c.Key, s.Int())
		}
	}
	return nil
}

// verify compares the slot's digest on both sides; the source is fenced
// and drained, so they must be equal.
func (t *slotTransfer) verify(ctx context.Context) error {
	a, err := t.Source.Checksum(ctx, &slotdv1.ChecksumRequest{Slot: t.slot()})
	if err != nil {
		return classify("checksum on source", err)
	}
	b, err := t.Target.Checksum(ctx, &slotdv1.ChecksumRequest{Slot: t.slot()})
	if err != nil {
		return classify("checksum on target", err)
	}
	if a.Keys != b.Keys || a.Bytes != b.Bytes || subtle.ConstantTimeCompare(a.Sha256, b.Sha256) != 1 {
		return fmt.Errorf("%w: slot %d differs after drain: source %d keys %d bytes, target %d keys %d bytes",
			ErrStoreLied, t.Slot.Int(), a.Keys, a.Bytes, b.Keys, b.Bytes)
	}
	return nil
}

func (t *slotTransfer) account(res *transferResult, bytes, keys int) {
	res.Bytes += int64(bytes)
	res.Keys += int64(keys)
	if t.Progress != nil {
		t.Progress(bytes, keys)
	}
}

func entryBytes(es []*slotdv1.Entry) int {
	n := 0
	for _, e := range es {
		n += len(e.Key) + len(e.Value)
	}
	return n
}
