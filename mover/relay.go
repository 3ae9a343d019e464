package mover

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/auth"
)

// The relay: the snapshot of a slot passes through the mover as the bytes
// the source encoded. Decoding an export batch into 20,000 entries and
// encoding them again into an import request cost the mover two copies of
// every key and value and an allocation per field, for nothing it looks at
// but the keys. The mover reads the batch's wire form in place instead:
// every key is still checked against the slot (a store that lies is
// refused before the target sees a byte of its batch), and the entries
// field goes on to the target as the same bytes, views of the buffer gRPC
// received them in. What the target receives is an ordinary ImportRequest,
// so a target of any version reads it; the source sends an ordinary
// ExportBatch.

// relayConn is implemented by the Store clients of a StorePool: the
// connection under them, for the calls the relay makes with its own codec.
// A Store client without it (a test's wrapper) is copied through decoded
// messages.
type relayConn interface {
	conn() grpc.ClientConnInterface
}

// poolClient is a StorePool's Store client.
type poolClient struct {
	slotdv1.StoreClient
	cc grpc.ClientConnInterface
}

func (c poolClient) conn() grpc.ClientConnInterface { return c.cc }

// relayCopy is copy over the relay: the export stream is received raw on
// the source's connection, and batches go to the target raw on its. Up to
// maxRelayQueue batches wait between the two; whatever waits when the
// target is ready (it was slower than the source) goes in one import of up
// to maxRelayImportBytes, so a durable target commits, and syncs, fewer
// and larger transactions exactly when its commits are what holds the copy
// back. A throttled copy merges up to a tenth of a second of its rate:
// the target falls behind only when its commits are slow (a durable one
// syncing), and importing batch by batch then left it behind for good
// (bench/cmd/cluster's item 5, slotkv durable, load 8-11: 20 MB/s windows 7.8 / 15.4 /
// 19.9 MB/s min / median / max batch by batch, 18.2 / 19.8 / 20.5 merged;
// 5 MB/s 3.2 / 4.5 / 5.1 against 4.9 / 5.0 / 5.0), while a target that
// keeps up still gets the throttle's 20 ms batches one by one.
//
// Two imports are in flight once the target has said it waits for a
// batch sent ahead (ImportResponse.waits_for_previous; a target of an
// older version never says so and gets one import at a time): the next
// import's transfer and decoding on the target then overlap the current
// one's commit, instead of a durable target sitting idle while its next
// batch arrives, and the target's commits back to back are what bounds
// the copy. Imports are still answered, counted and applied in order: the
// target applies a batch sent ahead only after its predecessor, and the
// copy ends at the answer of the done batch's import, the last in flight.
func (t *slotTransfer) relayCopy(ctx context.Context, src, dst grpc.ClientConnInterface, cursor []byte, res *transferResult) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mergeLimit := maxRelayImportBytes
	if t.Rate > 0 {
		mergeLimit = int(min(uint64(maxRelayImportBytes), t.Rate/10))
	}
	codec := grpc.ForceCodecV2(newRelayCodec())
	stream, err := src.NewStream(ctx, &slotdv1.Store_ServiceDesc.Streams[0], slotdv1.Store_Export_FullMethodName, codec)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	req := &slotdv1.ExportRequest{
		Slot: t.slot(), MoveId: t.MoveID, Cursor: cursor,
		RateBytesPerSecond: wireRate(t.Rate), MaxBatchBytes: t.MaxBatchBytes,
	}
	if err := stream.SendMsg(req); err != nil {
		return classify("export", err)
	}
	if err := stream.CloseSend(); err != nil {
		return classify("export", err)
	}
	batches := make(chan *rawBatch, maxRelayQueue)
	var recvErr error // set before batches is closed
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(batches)
		for {
			b := new(rawBatch)
			err := stream.RecvMsg(b)
			if err == nil {
				if err = b.scan(t.Slot); err != nil {
					b.buf.Free()
				}
			}
			switch {
			case err == io.EOF:
				recvErr = fmt.Errorf("%w: export of slot %d ended without its last batch", ErrCaptureLost, t.Slot.Int())
				return
			case errors.Is(err, ErrStoreLied):
				recvErr = err
				return
			case err != nil:
				recvErr = classify("export", err)
				return
			}
			select {
			case batches <- b:
			case <-ctx.Done():
				b.buf.Free()
				return
			}
			if b.done {
				return
			}
		}
	}()
	// inflight are the imports sent and not answered yet, oldest first;
	// carry is the batch that did not fit in the last import. window is
	// how many may be in flight: one, until the target says it lets a
	// batch sent ahead wait for its predecessor (waits_for_previous).
	var inflight []*relaySent
	var carry *rawBatch
	window := 1
	defer func() {
		cancel()
		<-done
		for _, f := range inflight {
			f.wait()
			f.free()
		}
		for b := range batches {
			b.buf.Free()
		}
		if carry != nil {
			carry.buf.Free()
		}
	}()
	// finish takes the oldest import's answer: its batches are applied
	// (and, on a durable target, synced) only now, in order.
	finish := func() (done bool, err error) {
		f := inflight[0]
		inflight = inflight[1:]
		err = f.wait()
		f.free()
		if err != nil {
			return false, classify("import snapshot batch", err)
		}
		if f.resp.GetWaitsForPrevious() {
			window = maxRelayInFlight
		}
		t.lastChange = max(t.lastChange, f.snapshotSeq)
		t.account(res, f.bytes, f.keys)
		return f.done, nil
	}
	sentDone := false
	for {
		if sentDone || len(inflight) == window {
			done, err := finish()
			if err != nil || done {
				return err
			}
			continue
		}
		b := carry
		carry = nil
		if b == nil && len(inflight) == 0 {
			var ok bool
			if b, ok = <-batches; !ok {
				return recvErr
			}
		}
		for b == nil {
			var ok bool
			select {
			case b, ok = <-batches:
				if !ok {
					return recvErr
				}
			case <-inflight[0].answered:
				if done, err := finish(); err != nil || done {
					return err
				}
				if len(inflight) == 0 {
					if b, ok = <-batches; !ok {
						return recvErr
					}
				}
			}
		}
		t.batchSeq++
		imp := &relayImport{slot: t.slot(), moveID: t.MoveID, batchSeq: t.batchSeq, batches: []*rawBatch{b}, afterPrevious: len(inflight) > 0}
	more:
		for !b.done {
			select {
			case next, ok := <-batches:
				if !ok {
					break more
				}
				if imp.batches = append(imp.batches, next); imp.encodedLen() > mergeLimit {
					imp.batches = imp.batches[:len(imp.batches)-1]
					carry = next
					break more
				}
				b = next
			default:
				break more
			}
		}
		sentDone = b.done
		pending := imp.batches
		if t.batchSeq == 1 && len(pending) == 1 && b.done {
			// A snapshot of one batch: no catch-up after it (as in copy),
			// and the source fenced beside its import when it is small.
			t.oneBatch = len(cursor) == 0
			if t.oneSmallBatch(cursor, t.batchSeq, b.done, b.bytes) {
				if err := t.fenceBeside(ctx); err != nil {
					return err
				}
			}
		}
		f := &relaySent{
			imp:         imp,
			resp:        new(slotdv1.ImportResponse),
			answered:    make(chan struct{}),
			snapshotSeq: b.snapshotSeq, done: b.done,
		}
		for _, b := range pending {
			f.bytes, f.keys = f.bytes+b.bytes, f.keys+b.keys
		}
		inflight = append(inflight, f)
		go func() {
			f.err = dst.Invoke(ctx, slotdv1.Store_Import_FullMethodName, f.imp, f.resp, codec)
			close(f.answered)
		}()
	}
}

// relaySent is one import on its way to the target.
type relaySent struct {
	imp         *relayImport
	resp        *slotdv1.ImportResponse
	bytes, keys int
	snapshotSeq uint64        // of its last batch
	done        bool          // its last batch ends the snapshot
	answered    chan struct{} // closed when err and resp are set
	err         error
}

func (f *relaySent) wait() error {
	<-f.answered
	return f.err
}

// free releases the import's batches; the call is over.
func (f *relaySent) free() {
	for _, b := range f.imp.batches {
		b.buf.Free()
	}
	f.imp.batches = f.imp.batches[:0:0]
}

// Relay bounds: batches waiting between source and target, the encoded
// size that waiting batches are merged up to, and the imports in flight.
// A single batch goes alone whatever its size (the source keeps it under
// 2 MiB and one entry); a merged import is at most the target's default
// 4 MiB receive limit (auth.DefaultMaxRecvMsgSize), which targets of
// every version have, counted exactly as encoded (encodedLen). Three of
// the source's 1 MiB batches fit: with the earlier bound of 3 MiB on the
// sum of the batches received, two did, and a durable copy of 20 MB made
// 10 commits where it now makes 8.
const (
	maxRelayQueue       = 4
	maxRelayImportBytes = auth.DefaultMaxRecvMsgSize
	maxRelayInFlight    = 2
)
