package mover

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/internal/bufpool"
	"github.com/slotd/slotd/slots"
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

// rawBatch is one ExportBatch as received: its bytes, and what the scan of
// them found. The entries are not decoded.
type rawBatch struct {
	buf mem.Buffer // the encoded batch; the holder frees it
	// entries is the byte range of buf holding the entries fields (tags
	// included), contiguous as a proto encoder writes them.
	entries     [2]int
	cursor      []byte // a view into buf
	snapshotSeq uint64
	done        bool
	keys, bytes int
}

// relayImport is a SnapshotImport built from one or more raw batches: the
// entries fields of each, then the last batch's cursor, snapshot sequence
// and done flag, and the mover's batch number.
type relayImport struct {
	slot     uint32
	moveID   string
	batchSeq uint64
	batches  []*rawBatch
	// afterPrevious: sent before the previous import was answered
	// (SnapshotImport.after_previous).
	afterPrevious bool
}

// relayCodec is the proto codec with two exceptions: a *rawBatch is
// received as bytes (not decoded; the caller scans them) and a *relayImport is sent as
// the views of the raw batches it is made of.
type relayCodec struct {
	proto encoding.CodecV2
}

func newRelayCodec() relayCodec {
	return relayCodec{proto: encoding.GetCodecV2("proto")}
}

// Name keeps the content-subtype "proto": on the wire nothing differs.
func (relayCodec) Name() string { return "proto" }

func (c relayCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(*relayImport)
	if !ok {
		return c.proto.Marshal(v)
	}
	return r.encode(), nil
}

func (c relayCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*rawBatch)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	// One contiguous buffer (a reference, not a copy, when gRPC received
	// the message in one piece) so that keys can be hashed where they lie,
	// from a pool that keeps batch-sized buffers (bufpool).
	b.buf = data.MaterializeToBuffer(bufpool.Overwritten)
	return nil
}

// errMalformed wraps a wire-format error in a batch: the store sent
// something no encoder writes.
func errMalformed(s slots.Slot, what string, at int) error {
	return fmt.Errorf("%w: export batch of slot %d is malformed (%s at byte %d)", ErrStoreLied, s.Int(), what, at)
}

// scan walks the encoded ExportBatch in b.buf: it checks every entry's key
// against slot s (the checkKeys of a decoded batch, with its message),
// counts keys and bytes, and notes the entries' byte range and the scalar
// fields. Unknown fields are skipped and not forwarded.
//
// It and entryKey walk the fields with protowire's calls, which inline
// here, and not with internal/wirefield's Next, which does not: a call per
// field made BenchmarkRelayScan 70% slower (27 to 46 µs per MiB).
func (b *rawBatch) scan(s slots.Slot) error {
	data := b.buf.ReadOnlyData()
	b.entries = [2]int{-1, -1}
	for at := 0; at < len(data); {
		num, typ, n := protowire.ConsumeTag(data[at:])
		if n < 0 {
			return errMalformed(s, "tag", at)
		}
		start := at
		at += n
		switch {
		case num == 2 && typ == protowire.BytesType: // entries
			e, n := protowire.ConsumeBytes(data[at:])
			if n < 0 {
				return errMalformed(s, "entry", at)
			}
			at += n
			key, size, err := entryKey(e)
			if err != nil {
				return errMalformed(s, err.Error(), start)
			}
			if ks := slots.ForKey(key); ks != s {
				return fmt.Errorf("%w: export of slot %d carried key %q of slot %d", ErrStoreLied, s.Int(), key, ks.Int())
			}
			switch {
			case b.entries[0] < 0:
				b.entries = [2]int{start, at}
			case b.entries[1] == start:
				b.entries[1] = at
			default:
				// Entries split by another field: no encoder writes that.
				return errMalformed(s, "entries not contiguous", start)
			}
			b.keys++
			b.bytes += size
		case num == 3 && typ == protowire.BytesType: // cursor
			v, n := protowire.ConsumeBytes(data[at:])
			if n < 0 {
				return errMalformed(s, "cursor", at)
			}
			b.cursor, at = v, at+n
		case num == 4 && typ == protowire.VarintType: // snapshot_seq
			v, n := protowire.ConsumeVarint(data[at:])
			if n < 0 {
				return errMalformed(s, "snapshot_seq", at)
			}
			b.snapshotSeq, at = v, at+n
		case num == 5 && typ == protowire.VarintType: // done
			v, n := protowire.ConsumeVarint(data[at:])
			if n < 0 {
				return errMalformed(s, "done", at)
			}
			b.done, at = v != 0, at+n
		default: // slot (field 1), or a field this mover does not know
			n := protowire.ConsumeFieldValue(num, typ, data[at:])
			if n < 0 {
				return errMalformed(s, "field", at)
			}
			at += n
		}
	}
	if b.entries[0] < 0 {
		b.entries = [2]int{0, 0}
	}
	return nil
}

// entryKey returns an encoded Entry's key (a view) and its key and value
// bytes; the last occurrence of a field wins, as in a decoder.
func entryKey(e []byte) (key []byte, size int, err error) {
	var value []byte
	for len(e) > 0 {
		num, typ, n := protowire.ConsumeTag(e)
		if n < 0 {
			return nil, 0, errors.New("entry tag")
		}
		e = e[n:]
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(e)
			if n < 0 {
				return nil, 0, errors.New("entry field")
			}
			if num == 1 {
				key = v
			} else {
				value = v
			}
			e = e[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, e)
		if n < 0 {
			return nil, 0, errors.New("entry field")
		}
		e = e[n:]
	}
	return key, len(key) + len(value), nil
}

// encode returns the ImportRequest as views of the raw batches between a
// small header and trailer. SnapshotImport's entries are field 2 of type
// Entry like ExportBatch's, so each batch's entries bytes are forwarded
// as they are.
func (r *relayImport) encode() mem.BufferSlice {
	head, trailer := r.frame()
	out := make(mem.BufferSlice, 0, len(r.batches)+2)
	out = append(out, mem.SliceBuffer(head))
	for _, b := range r.batches {
		if b.entries[1] > b.entries[0] {
			// A view holds its own reference: gRPC frees it once sent.
			out = append(out, b.buf.Slice(b.entries[0], b.entries[1]))
		}
	}
	return append(out, mem.SliceBuffer(trailer))
}

// encodedLen is the length of the ImportRequest encode sends: what the
// target's receive limit is checked against.
func (r *relayImport) encodedLen() int {
	head, trailer := r.frame()
	n := len(head) + len(trailer)
	for _, b := range r.batches {
		n += b.entries[1] - b.entries[0]
	}
	return n
}

// frame returns the bytes encode puts before and after the batches'
// entries.
func (r *relayImport) frame() (head, trailer []byte) {
	last := r.batches[len(r.batches)-1]
	if len(last.cursor) > 0 {
		trailer = protowire.AppendTag(trailer, 3, protowire.BytesType)
		trailer = protowire.AppendBytes(trailer, last.cursor)
	}
	if last.snapshotSeq != 0 {
		trailer = protowire.AppendTag(trailer, 4, protowire.VarintType)
		trailer = protowire.AppendVarint(trailer, last.snapshotSeq)
	}
	if last.done {
		trailer = protowire.AppendTag(trailer, 5, protowire.VarintType)
		trailer = protowire.AppendVarint(trailer, 1)
	}
	if r.afterPrevious {
		trailer = protowire.AppendTag(trailer, 6, protowire.VarintType)
		trailer = protowire.AppendVarint(trailer, 1)
	}
	trailer = protowire.AppendTag(trailer, 1, protowire.VarintType)
	trailer = protowire.AppendVarint(trailer, r.batchSeq)
	body := len(trailer)
	for _, b := range r.batches {
		body += b.entries[1] - b.entries[0]
	}
	if r.slot != 0 {
		head = protowire.AppendTag(head, 1, protowire.VarintType)
		head = protowire.AppendVarint(head, uint64(r.slot))
	}
	if r.moveID != "" {
		head = protowire.AppendTag(head, 2, protowire.BytesType)
		head = protowire.AppendString(head, r.moveID)
	}
	head = protowire.AppendTag(head, 3, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(body))
	return head, trailer
}

// relayCopy is copy over the relay: the export stream is received raw on
// the source's connection, and batches go to the target raw on its. Up to
// maxRelayQueue batches wait between the two; whatever waits when the
// target is ready (it was slower than the source) goes in one import of up
// to maxRelayImportBytes, so a durable target commits, and syncs, fewer
// and larger transactions exactly when its commits are what holds the copy
// back. A throttled copy merges up to a tenth of a second of its rate:
// the target falls behind only when its commits are slow (a durable one
// syncing), and importing batch by batch then left it behind for good
// (bench item 5, slotkv durable, load 8-11: 20 MB/s windows 7.8 / 15.4 /
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
func (t *Transfer) relayCopy(ctx context.Context, src, dst grpc.ClientConnInterface, cursor []byte, res *Result) error {
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
