package grpcapi

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/load"
	"github.com/slotd/slotd/mover"
)

// Defaults for Config fields left zero.
const (
	DefaultCatchUpWait = 2 * time.Second
)

// MoverStatus is what Status asks the mover executor running in this
// process: who leads, and how far the moves it copies have got.
type MoverStatus interface {
	// Leader returns the id of the elected mover, "" when none is.
	Leader(ctx context.Context) (string, error)
	// InFlight returns the moves this process is copying now.
	InFlight() []mover.MoveProgress
}

var _ MoverStatus = (*mover.Executor)(nil)

// Config configures a Service.
type Config struct {
	// Directory is the slot table. Required.
	Directory *directory.Directory
	// Hub follows the directory for the Directory server's reads and
	// streams, and names the cluster in every map (its ClusterID). The
	// Service runs it (Run). Required.
	Hub *Hub
	// Load is this replica's aggregate of the stores' load reports, which
	// the Load server fills and answers from. Required.
	Load *load.Aggregator
	// Control is the mover's operator API. Required.
	Control *mover.Control
	// Mover, when set, tells Status the leader and the bytes copied so far.
	Mover MoverStatus
	// ServerID names this replica in Status.
	ServerID string
	// Authenticated says that an auth interceptor runs in front of the
	// servers: the operator recorded in history is then the caller's
	// identity, never the request's operator field.
	Authenticated bool
	// CatchUpWait bounds how long a WatchMap waits for this replica to reach
	// the version the client already holds (a replica that just started)
	// before sending what it has. Default DefaultCatchUpWait.
	CatchUpWait time.Duration
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Directory == nil:
		return fmt.Errorf("%w: Directory is required", ErrInvalidConfig)
	case c.Hub == nil:
		return fmt.Errorf("%w: Hub is required", ErrInvalidConfig)
	case c.Load == nil:
		return fmt.Errorf("%w: Load is required", ErrInvalidConfig)
	case c.Control == nil:
		return fmt.Errorf("%w: Control is required", ErrInvalidConfig)
	case c.CatchUpWait < 0:
		return fmt.Errorf("%w: durations must not be negative", ErrInvalidConfig)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.CatchUpWait == 0 {
		c.CatchUpWait = DefaultCatchUpWait
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Service is slotd's gRPC API: the Directory and Admin servers over one
// map hub. Safe for concurrent use.
type Service struct {
	hub      *Hub
	dir      *DirectoryServer
	admin    *AdminServer
	auto     *AutoServer
	recovery *RecoveryServer
	op       *OperatorServer
	load     *LoadServer
}

// New builds the servers over cfg's hub and load aggregate. Run the hub
// with Run; register the servers with Register on a grpc.Server built with
// ServerOptions().
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	hub := cfg.Hub
	m.leases.known = func(id string) bool {
		cur := hub.Current()
		if cur == nil {
			return true
		}
		_, ok := cur.Node(id)
		return ok
	}
	d := &DirectoryServer{cfg: cfg, dir: cfg.Directory, hub: hub, m: m}
	a := &AdminServer{cfg: cfg, dir: cfg.Directory, ctl: cfg.Control, hub: hub, lg: cfg.Logger, leases: m.leases}
	au := &AutoServer{dir: cfg.Directory, admin: a, now: time.Now}
	r := &RecoveryServer{cfg: cfg, dir: cfg.Directory, lg: cfg.Logger, lastBytes: cfg.Load.LastBytes}
	l := &LoadServer{agg: cfg.Load, now: time.Now}
	return &Service{hub: hub, dir: d, admin: a, auto: au, recovery: r, op: &OperatorServer{a: a}, load: l}, nil
}

// Register registers the Directory, Admin, Info, Auto, Recovery, Operator
// and Load services on srv, which must have been built with ServerOptions().
func (s *Service) Register(srv grpc.ServiceRegistrar) {
	slotdv1.RegisterDirectoryServer(srv, s.dir)
	slotdv1.RegisterAdminServer(srv, s.admin)
	slotdv1.RegisterInfoServer(srv, &InfoServer{serverID: s.admin.cfg.ServerID})
	slotdv1.RegisterAutoServer(srv, s.auto)
	slotdv1.RegisterRecoveryServer(srv, s.recovery)
	slotdv1.RegisterOperatorServer(srv, s.op)
	slotdv1.RegisterLoadServer(srv, s.load)
}

// Run follows the directory until ctx is done; WatchMap streams end when
// it returns. See Hub.Run.
func (s *Service) Run(ctx context.Context) error { return s.hub.Run(ctx) }

// Directory returns the Directory server.
func (s *Service) Directory() *DirectoryServer { return s.dir }

// Admin returns the Admin server.
func (s *Service) Admin() *AdminServer { return s.admin }
