package grpcapi

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// encoded is a message marshalled once and sent as is to many streams: the
// hub encodes each map version once, not once per watcher.
type encoded struct {
	b   []byte
	msg any // the message b encodes, for anything that inspects sent messages
	// bs is b as gRPC sends it, built once rather than per stream (two
	// allocations a send). gRPC only reads it and releases it with Free,
	// which a SliceBuffer ignores.
	bs mem.BufferSlice
}

// codec is the proto codec, except that it sends an *encoded as its bytes.
type codec struct{ proto encoding.CodecV2 }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*encoded); ok {
		// SliceBuffer's Free does nothing, so gRPC may release it while
		// other streams still send the same bytes.
		if e.bs == nil {
			return mem.BufferSlice{mem.SliceBuffer(e.b)}, nil
		}
		return e.bs, nil
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (c codec) Name() string { return proto.Name }

// ServerOptions returns the options a grpc.Server must be built with to
// serve the Directory: a codec that sends the hub's pre-encoded messages.
// Every other message is encoded as usual.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(codec{proto: encoding.GetCodecV2(proto.Name)})}
}
