package mover

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
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
// the source's reconciliation does (guarantee 9).

// earlyExport is the source's StoreClient with one Export already open.
// Export hands that stream to the first identical request, once; every
// other call goes to the source. Safe for concurrent use.
type earlyExport struct {
	slotdv1.StoreClient // the source

	req    *slotdv1.ExportRequest
	cancel context.CancelFunc // ends the early stream
	ready  chan struct{}      // closed when stream and err are set
	stream grpc.ServerStreamingClient[slotdv1.ExportBatch]
	err    error
	taken  atomic.Bool
}

// startEarlyExport opens req on src under ctx. Call stop when the move
// is over (or did not begin), whether or not the stream was taken.
func startEarlyExport(ctx context.Context, src slotdv1.StoreClient, req *slotdv1.ExportRequest) *earlyExport {
	ectx, cancel := context.WithCancel(ctx)
	x := &earlyExport{StoreClient: src, req: req, cancel: cancel, ready: make(chan struct{})}
	go func() {
		defer close(x.ready)
		x.stream, x.err = src.Export(ectx, req)
	}()
	return x
}

// Export implements slotdv1.StoreClient. The early stream, once taken,
// ends with ctx as a stream opened under ctx would.
func (x *earlyExport) Export(ctx context.Context, in *slotdv1.ExportRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[slotdv1.ExportBatch], error) {
	if !proto.Equal(in, x.req) || !x.taken.CompareAndSwap(false, true) {
		return x.StoreClient.Export(ctx, in, opts...)
	}
	context.AfterFunc(ctx, x.cancel)
	select {
	case <-x.ready:
		return x.stream, x.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// stop ends the early stream (a no-op once its taker's context ended)
// and waits for its opening to return.
func (x *earlyExport) stop() {
	x.cancel()
	<-x.ready
}

// used reports whether a transfer took the early stream.
func (x *earlyExport) used() bool { return x.taken.Load() }
