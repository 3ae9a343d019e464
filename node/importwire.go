package node

import (
	"bytes"
	"context"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/internal/bufpool"
	"github.com/slotd/slotd/internal/wirefield"
)

// The import path in place: a snapshot batch's keys and values are read
// where gRPC received them and handed to Store.Apply as views of that
// buffer. Decoding an ImportRequest with proto.Unmarshal made three
// allocations and a copy of every entry (the Entry message, its key, its
// value) on the target of every move, about a third of its Import
// handler's CPU for a slot of 1 KiB values, only to copy them again into
// Mutations. The wire format is the ordinary ImportRequest: a mover of any
// version talks to this target, and a request the fast path does not take
// (changes, unknown fields, a field twice, anything malformed) is decoded
// by proto.Unmarshal as before.

// ServerOptions returns the gRPC server options the node's Store service
// wants: a codec that lets Import read snapshot batches in place. It is
// the proto codec for every other message, so it serves a whole server.
// Without it Import decodes with proto.Unmarshal; nothing else differs.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(storeCodec{encoding.GetCodecV2(protoenc.Name)})}
}

// storeCodec is the proto codec, except that an *importRequest takes its
// snapshot batch in place when it can.
type storeCodec struct {
	proto encoding.CodecV2
}

// Name keeps the content-subtype "proto": on the wire nothing differs.
func (storeCodec) Name() string { return protoenc.Name }

func (c storeCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c storeCodec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*importRequest)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	// One contiguous buffer: a reference, not a copy, when gRPC received
	// the message in one piece; from a pool that keeps import-sized
	// buffers (bufpool).
	buf := data.MaterializeToBuffer(bufpool.Overwritten)
	if r.parse(buf.ReadOnlyData()) {
		r.buf = buf
		return nil
	}
	defer buf.Free()
	r.reset()
	return proto.Unmarshal(buf.ReadOnlyData(), &r.ImportRequest)
}

// importRequest is what the Import handler decodes into. Through the
// storeCodec, a snapshot batch is read in place into the fields below
// (fast set; the entries are views of buf). Through any other codec it is
// an ordinary ImportRequest: the embedded message is what proto sees.
type importRequest struct {
	slotdv1.ImportRequest

	fast   bool
	buf    mem.Buffer // holds what entries point into; free releases it
	slot   uint32
	moveID string
	batch  SnapshotBatch
}

// free releases the received buffer: the batch's entries are invalid
// after it.
func (r *importRequest) free() {
	if r.buf != nil {
		r.buf.Free()
		r.buf = nil
	}
	r.batch.Entries = nil
}

func (r *importRequest) reset() {
	r.fast, r.slot, r.moveID, r.batch = false, 0, "", SnapshotBatch{}
}

// Field numbers of ImportRequest, SnapshotImport and Entry (store.proto).
const (
	reqSlot     = 1
	reqMoveID   = 2
	reqSnapshot = 3

	snapBatchSeq      = 1
	snapEntries       = 2
	snapCursor        = 3
	snapSnapshotSeq   = 4
	snapDone          = 5
	snapAfterPrevious = 6

	entryKey   = 1
	entryValue = 2
)

// parse reads b as an ImportRequest carrying a snapshot batch. It reports
// false, leaving r to be reset, for anything proto.Unmarshal could read
// differently: another batch kind, an unknown field, a field that is not
// repeated appearing twice, a string that is not UTF-8, bytes that do not
// parse.
func (r *importRequest) parse(b []byte) bool {
	var seen uint8
	var snap []byte
	ok := wirefield.Each(b, func(f wirefield.Field) bool {
		if f.Num > reqSnapshot || seen&(1<<f.Num) != 0 {
			return false
		}
		seen |= 1 << f.Num
		switch {
		case f.Num == reqSlot && f.Type == protowire.VarintType:
			r.slot = uint32(f.V)
		case f.Num == reqMoveID && f.Type == protowire.BytesType && utf8.Valid(f.Body):
			r.moveID = string(f.Body)
		case f.Num == reqSnapshot && f.Type == protowire.BytesType:
			snap = f.Body
		default:
			return false
		}
		return true
	})
	if !ok || snap == nil {
		return false
	}
	r.fast = true
	return r.parseSnapshot(snap)
}

func (r *importRequest) parseSnapshot(b []byte) bool {
	// Count the entries first so that they take one allocation. Both
	// loops are written out, not wirefield.Each: they run for every entry
	// (see parseEntry).
	n := 0
	for rest := b; len(rest) > 0; {
		f, m := wirefield.Next(rest)
		if m < 0 {
			return false
		}
		rest = rest[m:]
		if f.Num == snapEntries {
			n++
		}
	}
	sb := &r.batch
	sb.Entries = make([]Entry, 0, n)
	var seen uint8
	for len(b) > 0 {
		f, m := wirefield.Next(b) // parsed above
		b = b[m:]
		if f.Num > snapAfterPrevious || f.Num != snapEntries && seen&(1<<f.Num) != 0 {
			return false
		}
		seen |= 1 << f.Num
		varint, body := f.Type == protowire.VarintType, f.Type == protowire.BytesType
		switch {
		case f.Num == snapBatchSeq && varint:
			sb.BatchSeq = f.V
		case f.Num == snapEntries && body:
			e, ok := parseEntry(f.Body)
			if !ok {
				return false
			}
			sb.Entries = append(sb.Entries, e)
		case f.Num == snapCursor && body:
			// Kept in the import state after the request: a copy.
			sb.Cursor = bytes.Clone(f.Body)
		case f.Num == snapSnapshotSeq && varint:
			sb.SnapshotSeq = f.V
		case f.Num == snapDone && varint:
			sb.Done = f.V != 0
		case f.Num == snapAfterPrevious && varint:
			sb.AfterPrevious = f.V != 0
		default:
			return false
		}
	}
	return true
}

func parseEntry(b []byte) (e Entry, ok bool) {
	// A loop of its own, not wirefield.Each: with a closure call per
	// field, here and in parseSnapshot, BenchmarkImportDecode took 7%
	// longer.
	var seen uint8
	for len(b) > 0 {
		f, n := wirefield.Next(b)
		if n < 0 || f.Type != protowire.BytesType || f.Num < entryKey || f.Num > entryValue || seen&(1<<f.Num) != 0 {
			return e, false
		}
		b = b[n:]
		seen |= 1 << f.Num
		// Capacity clipped: an append to one cannot reach the next.
		if f.Num == entryKey {
			e.Key = f.Body[:len(f.Body):len(f.Body)]
		} else {
			e.Value = f.Body[:len(f.Body):len(f.Body)]
		}
	}
	// proto3 leaves an absent bytes field empty; so does this.
	return e, true
}

// importHandler is the Import method's gRPC handler: the generated one,
// decoding into an importRequest.
func importHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(importRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	defer in.free()
	x := srv.(*storeServer)
	if interceptor == nil {
		return x.importRequest(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: slotdv1.Store_Import_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		if r, ok := req.(*importRequest); ok {
			return x.importRequest(ctx, r)
		}
		// An interceptor replaced the request with a message of its own.
		return x.Import(ctx, req.(*slotdv1.ImportRequest))
	})
}

// importRequest serves a decoded Import: in place when the codec read it
// so, as Import otherwise.
func (x *storeServer) importRequest(ctx context.Context, r *importRequest) (*slotdv1.ImportResponse, error) {
	if !r.fast {
		return x.Import(ctx, &r.ImportRequest)
	}
	s, err := slotOf(r.slot)
	if err != nil {
		return nil, StatusError(err)
	}
	st, dup, err := x.n.ImportSnapshot(ctx, s, r.moveID, r.batch)
	return importResponse(st, dup, err)
}

// storeServiceDesc is the generated Store service with Import served by
// importHandler.
var storeServiceDesc = func() grpc.ServiceDesc {
	d := slotdv1.Store_ServiceDesc
	d.Methods = append([]grpc.MethodDesc(nil), d.Methods...)
	for i := range d.Methods {
		if d.Methods[i].MethodName == "Import" {
			d.Methods[i].Handler = importHandler
			return d
		}
	}
	panic("node: the Store service has no Import method")
}()
