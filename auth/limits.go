package auth

import "google.golang.org/grpc"

// Defaults for Limits. A request larger than DefaultMaxRecvMsgSize is
// refused with ResourceExhausted before it is decoded; 4 MiB leaves room for
// the largest legitimate request (an import batch, whose size the mover
// bounds well below that) and little for an attacker.
const (
	DefaultMaxRecvMsgSize       = 4 << 20
	DefaultMaxConcurrentStreams = 1024
	DefaultMaxHeaderListSize    = 64 << 10
)

// Limits bounds what one client can make a gRPC server hold. Zero fields
// take the defaults.
type Limits struct {
	// MaxRecvMsgSize is the largest request message, in bytes.
	MaxRecvMsgSize int
	// MaxConcurrentStreams caps in-flight RPCs (watches included) per connection.
	MaxConcurrentStreams uint32
	// MaxHeaderListSize caps the request metadata, in bytes.
	MaxHeaderListSize uint32
}

// ServerOptions returns the grpc.NewServer options for l.
func (l Limits) ServerOptions() []grpc.ServerOption {
	if l.MaxRecvMsgSize <= 0 {
		l.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if l.MaxConcurrentStreams == 0 {
		l.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if l.MaxHeaderListSize == 0 {
		l.MaxHeaderListSize = DefaultMaxHeaderListSize
	}
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(l.MaxRecvMsgSize),
		grpc.MaxConcurrentStreams(l.MaxConcurrentStreams),
		grpc.MaxHeaderListSize(l.MaxHeaderListSize),
	}
}
