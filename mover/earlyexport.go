package mover

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// An early export overlaps a fresh move's first round trip to the source
// (Export: the capture starts, the first batch is scanned) with its begin
// in the directory: for an empty slot the begin's transaction was a third
// of the protocol, spent with the stores idle.
//
// Only the source is asked early. Nothing reaches the target before the
// begin is recorded: the target refuses an import into a slot it owns
// only by its own map, and importing on a stale table could overwrite
// data (or another move's progress) of a slot that has moved. A source
// asked early for a move that then does not begin holds a capture that
// nothing explains: the executor ends it (the cleaner), and failing that
// the source's reconciliation does (a store drops what no owner or move
// in flight explains).
//
// The early stream is opened the way the relay opens its export (relay.go:
// on the source's connection, with the relay codec, which decodes anything
// but a raw batch as proto), so the transfer takes it whichever way it
// copies: through Export (decoded batches) or through the connection
// (relayed batches).

// earlyExport is the source's StoreClient with one Export already open.
// The first identical request takes that stream, once; every other call
// goes to the source. Safe for concurrent use.
type earlyExport struct {
	slotdv1.StoreClient // the source

	req    *slotdv1.ExportRequest
	cancel context.CancelFunc // ends the early stream
	ready  chan struct{}      // closed when stream and err are set
	stream grpc.ClientStream  // request sent, send side closed
	err    error
	taken  atomic.Bool
}

// earlyRelay is an earlyExport whose source can relay: its connection
// hands the early stream to the relay's Export too.
type earlyRelay struct {
	*earlyExport
	cc grpc.ClientConnInterface
}

func (r earlyRelay) conn() grpc.ClientConnInterface { return earlyConn{r.cc, r.earlyExport} }

// startEarlyExport opens req on src under ctx and returns src's client
// with the stream waiting in it, and a stop to call when the move is over
// (or did not begin), whether or not the stream was taken.
func startEarlyExport(ctx context.Context, src slotdv1.StoreClient, req *slotdv1.ExportRequest) (slotdv1.StoreClient, func()) {
	ectx, cancel := context.WithCancel(ctx)
	x := &earlyExport{StoreClient: src, req: req, cancel: cancel, ready: make(chan struct{})}
	rc, relays := src.(relayConn)
	go func() {
		defer close(x.ready)
		if !relays {
			x.stream, x.err = src.Export(ectx, req)
			return
		}
		x.stream, x.err = openExport(ectx, rc.conn(), req, grpc.ForceCodecV2(newRelayCodec()))
	}()
	if relays {
		return earlyRelay{x, rc.conn()}, x.stop
	}
	return x, x.stop
}

// stop ends the early stream, taken or not, and waits for its open to end.
func (x *earlyExport) stop() {
	x.cancel()
	<-x.ready
}

// openExport opens an Export stream on cc and sends req.
func openExport(ctx context.Context, cc grpc.ClientConnInterface, req *slotdv1.ExportRequest, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := cc.NewStream(ctx, &slotdv1.Store_ServiceDesc.Streams[0], slotdv1.Store_Export_FullMethodName, opts...)
	if err != nil {
		return nil, err
	}
	if err := s.SendMsg(req); err != nil {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	return s, nil
}

// retireWait bounds how long retire waits for the source's first answer.
const retireWait = 5 * time.Second

// errUnordered: an early export was ended before the source answered, so
// its request may still reach the source after anything sent now.
var errUnordered = errors.New("mover: the early export ended before the source answered")

// retire ends an early export that no move will take, and the capture it
// started on the source, before the caller goes on. A move of the same
// slot begun after it (the same move retried, or the plan stored for the
// executor once the leader's own begin failed) starts a capture of its
// own, and the source lets a new capture replace the one running: a stale
// early request reaching the source after that replaced the live move's
// capture with its own, and the live move failed at its drain ("slot is
// captured for move A, not B") and paused its plan, about once in a few
// thousand one-slot moves. The source answers an export only after it has
// started the capture (or refuses it), so once that answer is in, the
// EndCapture sent here reaches it after the capture began, and nothing of
// this export comes after. errUnordered (no answer within retireWait)
// says that order is not known: the caller leaves the capture to the
// cleaner and the source's reconciliation.
func (x *earlyExport) retire(ctx context.Context, slot slots.Slot) error {
	if !x.taken.CompareAndSwap(false, true) {
		// A transfer took the stream: its move began, and ends it.
		x.stop()
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, retireWait)
	defer cancel()
	stopAfter := context.AfterFunc(rctx, x.cancel)
	<-x.ready
	err := x.err
	if err == nil {
		err = x.stream.RecvMsg(new(slotdv1.ExportBatch))
	}
	stopAfter()
	x.cancel()
	switch status.Code(err) {
	case codes.OK:
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.Unknown:
		// Ended here or on the way (an open that failed, a connection
		// lost): the request may be yet to reach the source's handler.
		return errUnordered
	}
	// Answered, with a batch or the source's own refusal: the handler ran.
	ectx, ecancel := context.WithTimeout(ctx, retireWait)
	defer ecancel()
	_, err = x.StoreClient.EndCapture(ectx, &slotdv1.EndCaptureRequest{Slot: uint32(slot.Int()), MoveId: x.req.GetMoveId()})
	if isGone(err) {
		return nil
	}
	return err
}

// earlyOf returns the early export c holds, or nil.
func earlyOf(c slotdv1.StoreClient) *earlyExport {
	switch x := c.(type) {
	case *earlyExport:
		return x
	case earlyRelay:
		return x.earlyExport
	}
	return nil
}

// take hands the early stream to a request equal to the early one, once;
// it then ends with ctx, as a stream opened under ctx would. ok is false
// for any other request (the caller opens its own).
func (x *earlyExport) take(ctx context.Context, in any) (s grpc.ClientStream, ok bool, err error) {
	req, isExport := in.(*slotdv1.ExportRequest)
	if !isExport || !proto.Equal(req, x.req) || !x.taken.CompareAndSwap(false, true) {
		return nil, false, nil
	}
	context.AfterFunc(ctx, x.cancel)
	select {
	case <-x.ready:
		return x.stream, true, x.err
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
}

// Export implements slotdv1.StoreClient.
func (x *earlyExport) Export(ctx context.Context, in *slotdv1.ExportRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[slotdv1.ExportBatch], error) {
	s, ok, err := x.take(ctx, in)
	if !ok {
		return x.StoreClient.Export(ctx, in, opts...)
	}
	if err != nil {
		return nil, err
	}
	if g, isGeneric := s.(grpc.ServerStreamingClient[slotdv1.ExportBatch]); isGeneric {
		return g, nil
	}
	return &grpc.GenericClientStream[slotdv1.ExportRequest, slotdv1.ExportBatch]{ClientStream: s}, nil
}

var (
	_ relayConn         = earlyRelay{}
	_ grpc.ClientStream = (*lateStream)(nil)
)

// earlyConn is the source's connection with the early stream waiting in
// it for the relay's Export.
type earlyConn struct {
	grpc.ClientConnInterface
	x *earlyExport
}

// NewStream implements grpc.ClientConnInterface: an Export stream is
// opened when its request is sent, so that the early one can stand in.
func (c earlyConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if method != slotdv1.Store_Export_FullMethodName {
		return c.ClientConnInterface.NewStream(ctx, desc, method, opts...)
	}
	return &lateStream{ctx: ctx, open: func() (grpc.ClientStream, error) {
		return c.ClientConnInterface.NewStream(ctx, desc, method, opts...)
	}, x: c.x}, nil
}

// lateStream is an Export stream whose opening waits for its request:
// the early stream when the request is the early one, else a new one.
type lateStream struct {
	ctx  context.Context
	open func() (grpc.ClientStream, error)
	x    *earlyExport

	once sync.Once
	s    grpc.ClientStream
	err  error
}

// resolve opens the stream on the first call: the early one if first is
// its request (already sent), else a new one with first sent on it.
// sentFirst says this call sent first.
func (l *lateStream) resolve(first any) (sentFirst bool, err error) {
	l.once.Do(func() {
		sentFirst = true
		s, ok, err := l.x.take(l.ctx, first)
		if ok {
			l.s, l.err = s, err
			return
		}
		if l.s, l.err = l.open(); l.err == nil && first != nil {
			l.err = l.s.SendMsg(first)
		}
	})
	return sentFirst, l.err
}

// SendMsg implements grpc.ClientStream. The first message decides.
func (l *lateStream) SendMsg(m any) error {
	sent, err := l.resolve(m)
	if sent || err != nil {
		return err
	}
	return l.s.SendMsg(m)
}

// CloseSend implements grpc.ClientStream (the early stream's send side is
// closed already; closing it again is a no-op in grpc).
func (l *lateStream) CloseSend() error {
	if _, err := l.resolve(nil); err != nil {
		return err
	}
	return l.s.CloseSend()
}

// RecvMsg implements grpc.ClientStream.
func (l *lateStream) RecvMsg(m any) error {
	if _, err := l.resolve(nil); err != nil {
		return err
	}
	return l.s.RecvMsg(m)
}

// Header implements grpc.ClientStream.
func (l *lateStream) Header() (metadata.MD, error) {
	if _, err := l.resolve(nil); err != nil {
		return nil, err
	}
	return l.s.Header()
}

// Trailer implements grpc.ClientStream.
func (l *lateStream) Trailer() metadata.MD {
	if _, err := l.resolve(nil); err != nil {
		return nil
	}
	return l.s.Trailer()
}

// Context implements grpc.ClientStream.
func (l *lateStream) Context() context.Context {
	if _, err := l.resolve(nil); err != nil {
		return l.ctx
	}
	return l.s.Context()
}
