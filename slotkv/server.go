package slotkv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slotkv/kvpb"
)

// Config configures a slotkv node.
type Config struct {
	// ID is the node's stable name in the directory (required).
	ID string
	// DataDir holds the data file (slotkv.db) and the node library's state
	// (node/) (required; created if missing).
	DataDir string
	// Map says who owns each slot (required): the SDK's map cache in a
	// cluster, a node.StaticMap in tests.
	Map node.MapSource
	// NoSync turns off fsync at each commit (see EngineOptions.NoSync).
	NoSync bool
	// ExportBytesPerSecond is the initial export throttle; 0 is unlimited.
	ExportBytesPerSecond int64
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Registerer receives the metrics (default: none).
	Registerer prometheus.Registerer
	// ReconcileInterval, ReconcileGrace and FreshMap configure the node
	// library's reconciliation (node.Config; zero values take its defaults).
	ReconcileInterval time.Duration
	ReconcileGrace    time.Duration
	FreshMap          node.FreshMapFunc
	// Clock, when set, is the node library's clock (tests).
	Clock node.Clock
	// Lease, when set, is the node's lease from slotd (node.Config.Lease):
	// the node serves its slots only while it holds.
	Lease *node.Lease
}

// Validate reports the first missing field.
func (c *Config) Validate() error {
	switch {
	case c.ID == "":
		return errors.New("slotkv: Config.ID is required")
	case c.DataDir == "":
		return errors.New("slotkv: Config.DataDir is required")
	case c.Map == nil:
		return errors.New("slotkv: Config.Map is required")
	case c.ExportBytesPerSecond < 0:
		return errors.New("slotkv: Config.ExportBytesPerSecond must not be negative")
	}
	return nil
}

// Server is a slotkv node: the bbolt engine, the node library around it, and
// the gRPC KV API. It is safe for concurrent use.
type Server struct {
	kvpb.UnimplementedKVServer
	eng  *Engine
	node *node.Node
	rpc  *rpcMetrics
}

var _ kvpb.KVServer = (*Server)(nil)

// Open opens the data dir. Every key and every fence of an earlier run is
// there again. Call Run for background work and Close at the end.
func Open(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("slotkv: create data dir: %w", err)
	}
	eng, err := OpenEngine(filepath.Join(cfg.DataDir, "slotkv.db"), EngineOptions{NoSync: cfg.NoSync})
	if err != nil {
		return nil, err
	}
	n, err := node.New(node.Config{
		ID: cfg.ID, Store: eng, Map: cfg.Map, StateDir: filepath.Join(cfg.DataDir, "node"),
		NoSync: cfg.NoSync, ExportBytesPerSecond: cfg.ExportBytesPerSecond,
		Logger: cfg.Logger, Registerer: cfg.Registerer,
		ReconcileInterval: cfg.ReconcileInterval, ReconcileGrace: cfg.ReconcileGrace, FreshMap: cfg.FreshMap, Clock: cfg.Clock,
		Lease: cfg.Lease,
	})
	if err != nil {
		eng.Close()
		return nil, err
	}
	return &Server{eng: eng, node: n, rpc: newRPCMetrics(cfg.Registerer)}, nil
}

// Node returns the embedded node library.
func (s *Server) Node() *node.Node { return s.node }

// Engine returns the storage engine.
func (s *Server) Engine() *Engine { return s.eng }

// Register adds the KV and the slotd.v1.Store services to a gRPC server.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	kvpb.RegisterKVServer(g, s)
	s.node.RegisterStore(g)
}

// Run does the node library's background work until ctx is done.
func (s *Server) Run(ctx context.Context) error { return s.node.Run(ctx) }

// Close closes the node library, then the data file. Call it after Run
// returned and the gRPC server stopped.
func (s *Server) Close() error {
	return errors.Join(s.node.Close(), s.eng.Close())
}

func kvError(err error) error {
	switch {
	case errors.Is(err, ErrEmptyKey), errors.Is(err, ErrTooLarge):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrCorrupt):
		return status.Error(codes.DataLoss, err.Error())
	}
	return node.StatusError(err)
}

func checkSizes(key, value []byte) error {
	switch {
	case len(key) == 0:
		return ErrEmptyKey
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: key of %d bytes, limit %d", ErrTooLarge, len(key), MaxKeyBytes)
	case len(value) > MaxValueBytes:
		return fmt.Errorf("%w: value of %d bytes, limit %d", ErrTooLarge, len(value), MaxValueBytes)
	}
	return nil
}

// Get implements kvpb.KVServer. Fenced slots still serve reads.
func (s *Server) Get(ctx context.Context, req *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	if len(req.GetKey()) == 0 {
		return nil, kvError(ErrEmptyKey)
	}
	if err := s.node.CheckRead(req.GetKey()); err != nil {
		return nil, kvError(err)
	}
	raw, err := s.eng.Get(req.GetKey())
	if err != nil || raw == nil {
		return &kvpb.GetResponse{}, kvError(err)
	}
	v, val, err := DecodeValue(raw)
	if err != nil {
		return nil, kvError(err)
	}
	return &kvpb.GetResponse{Found: true, Value: val, Version: v}, nil
}

// version returns the key's current version, 0 if absent. Called inside
// node.Write's prepare, under the slot's write lock.
func (s *Server) version(key []byte) (uint64, error) {
	raw, err := s.eng.Get(key)
	if err != nil || raw == nil {
		return 0, err
	}
	v, _, err := DecodeValue(raw)
	return v, err
}

// Put implements kvpb.KVServer.
func (s *Server) Put(ctx context.Context, req *kvpb.PutRequest) (*kvpb.PutResponse, error) {
	key := req.GetKey()
	if err := checkSizes(key, req.GetValue()); err != nil {
		return nil, kvError(err)
	}
	var next uint64
	err := s.node.Write(ctx, key, func() ([]node.Mutation, error) {
		v, err := s.version(key)
		if err != nil {
			return nil, err
		}
		next = v + 1
		return []node.Mutation{{Key: key, Value: EncodeValue(next, req.GetValue())}}, nil
	})
	if err != nil {
		return nil, kvError(err)
	}
	return &kvpb.PutResponse{Version: next}, nil
}

// Delete implements kvpb.KVServer.
func (s *Server) Delete(ctx context.Context, req *kvpb.DeleteRequest) (*kvpb.DeleteResponse, error) {
	key := req.GetKey()
	if len(key) == 0 {
		return nil, kvError(ErrEmptyKey)
	}
	var deleted bool
	err := s.node.Write(ctx, key, func() ([]node.Mutation, error) {
		v, err := s.version(key)
		if err != nil || v == 0 {
			return nil, err
		}
		deleted = true
		return []node.Mutation{{Key: key, Delete: true}}, nil
	})
	if err != nil {
		return nil, kvError(err)
	}
	return &kvpb.DeleteResponse{Deleted: deleted}, nil
}

// CompareAndSet implements kvpb.KVServer.
func (s *Server) CompareAndSet(ctx context.Context, req *kvpb.CompareAndSetRequest) (*kvpb.CompareAndSetResponse, error) {
	key := req.GetKey()
	if err := checkSizes(key, req.GetValue()); err != nil {
		return nil, kvError(err)
	}
	resp := &kvpb.CompareAndSetResponse{}
	err := s.node.Write(ctx, key, func() ([]node.Mutation, error) {
		v, err := s.version(key)
		if err != nil {
			return nil, err
		}
		if v != req.GetExpectedVersion() {
			resp.Version = v
			return nil, nil
		}
		resp.Swapped, resp.Version = true, v+1
		return []node.Mutation{{Key: key, Value: EncodeValue(v+1, req.GetValue())}}, nil
	})
	if err != nil {
		return nil, kvError(err)
	}
	return resp, nil
}
