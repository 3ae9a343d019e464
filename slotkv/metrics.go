package slotkv

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/node"
)

// rpcMetrics counts and times the node's gRPC calls. Labels are bounded:
// the method is one of the KV and Store methods, the code one of gRPC's.
type rpcMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newRPCMetrics(reg prometheus.Registerer) *rpcMetrics {
	m := &rpcMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotd_slotkv_requests_total",
			Help: "gRPC calls served by slotkv, by method and status code.",
		}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "slotd_slotkv_request_duration_seconds",
			Help:    "Time to serve a unary gRPC call, by method.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12), // 100µs to ~6s
		}, []string{"method"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration)
	}
	return m
}

func (m *rpcMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	m.duration.WithLabelValues(info.FullMethod).Observe(time.Since(start).Seconds())
	m.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	return resp, err
}

func (m *rpcMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	err := h(srv, ss)
	m.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	return err
}

// ServerOptions returns the gRPC server options slotkv wants: the node
// library's (imports read in place), its request metrics, and receive
// windows that take a move's import batches (up to
// 4 MiB each, two in flight) without a window update every 16 KiB; pass
// them to grpc.NewServer.
func (s *Server) ServerOptions() []grpc.ServerOption {
	return append(node.ServerOptions(),
		grpc.ChainUnaryInterceptor(s.rpc.unary),
		grpc.ChainStreamInterceptor(s.rpc.stream),
		grpc.InitialWindowSize(importWindow),
		grpc.InitialConnWindowSize(2*importWindow),
	)
}

// importWindow is the HTTP/2 receive window of one stream. gRPC's default
// starts at 64 KiB and grows only as its bandwidth-delay estimate does,
// which on a fast link takes the first moves after every restart.
const importWindow = 4 << 20
