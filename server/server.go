package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/console"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/grpcapi"
	"github.com/slotd/slotd/load"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/server/embedetcd"
	"github.com/slotd/slotd/tlsconf"
)

// Server is one slotd: built by New, served by Run, released by Close.
// Its getters are safe for concurrent use.
type Server struct {
	cfg       Config
	lg        *slog.Logger
	reg       *prometheus.Registry
	ts        *tlsconf.Server // nil without TLS
	member    *embedetcd.Server
	endpoints []string
	cli       *clientv3.Client
	dir       *directory.Directory
	pool      *mover.StorePool
	exe       *mover.Executor // nil with DisableMover
	hub       *grpcapi.Hub
	load      *load.Aggregator
	svc       *grpcapi.Service
	az        *auth.Authorizer
	clusterID string
	gs        *grpc.Server
	hs        *health.Server
	lis       net.Listener
	hsrv      *http.Server // nil without HTTP
	hlis      net.Listener

	runOnce   sync.Once // Run serves once
	closeOnce sync.Once
	served    bool // Run started serving the listeners; set inside runOnce
}

// New builds a slotd from cfg: TLS material, the etcd client (starting the
// embedded etcd unless cfg.EtcdEndpoints), schema migrations, the mover and
// the API, and binds its listeners, so that the address getters answer.
// It serves nothing until Run. On error everything it started is closed.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, lg: cfg.Logger}
	if s.lg == nil {
		s.lg = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	lg := s.lg
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// TLS material first: a bad file should stop slotd before it touches etcd.
	srvTLS := tlsconf.Config{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, CAFile: cfg.TLSCA, ClientAuth: tlsconf.ClientAuth(cfg.ClientAuth), Logger: lg}
	if srvTLS.Enabled() {
		if s.ts, err = tlsconf.NewServer(srvTLS); err != nil {
			return nil, err
		}
	}

	// The etcd client: embedded member or an external cluster.
	if s.member, s.endpoints, s.cli, err = openEtcd(ctx, cfg, lg); err != nil {
		return nil, err
	}

	s.dir, err = directory.New(directory.Config{
		Client: s.cli, Prefix: cfg.EtcdPrefix, Logger: lg, Registerer: s.reg,
		RequestTimeout: cfg.RequestTimeout, DownAfter: cfg.DownAfter, HoldDown: cfg.HoldDown, LeaseMargin: cfg.LeaseMargin,
	})
	if err != nil {
		return nil, err
	}
	if err := applyMigrations(ctx, s.dir, lg); err != nil {
		if errors.Is(err, directory.ErrUnavailable) {
			// The first etcd request: say which etcd did not answer.
			return nil, fmt.Errorf("etcd at %s did not answer within --request-timeout %s (is it running, and are --etcd-endpoints and the etcd TLS flags right?): %w",
				strings.Join(s.endpoints, ","), cfg.RequestTimeout, err)
		}
		return nil, err
	}
	etcdID, err := etcdClusterID(ctx, s.cli, cfg.RequestTimeout)
	if err != nil {
		return nil, err
	}
	// The cluster id is stored in the directory the first time: the etcd
	// cluster's id under the default prefix (what maps always carried),
	// with the prefix appended under any other, so that two clusters on
	// one etcd never pass for each other; a restore keeps the saved one.
	proposed := etcdID
	if p := s.dir.Prefix(); p != directory.DefaultPrefix {
		proposed += p
	}
	if s.clusterID, err = s.dir.ClusterID(ctx, proposed); err != nil {
		return nil, err
	}

	storeDial, err := storeDialOptions(cfg, lg)
	if err != nil {
		return nil, err
	}
	// The map this replica serves, followed from the directory, and its
	// aggregate of the stores' load reports, checked against that map:
	// built before their users (the mover's plans and balancer, the API,
	// the console), which share them.
	if s.hub, err = grpcapi.NewHub(grpcapi.HubConfig{Directory: s.dir, ClusterID: s.clusterID, Logger: lg, Registerer: s.reg}); err != nil {
		return nil, err
	}
	if s.load, err = load.New(load.Config{Map: s.hub}); err != nil {
		return nil, err
	}
	if err := s.reg.Register(s.load.Collector()); err != nil {
		return nil, fmt.Errorf("register load metrics: %w", err)
	}

	s.pool = mover.NewStorePool(mover.PoolConfig{DialOptions: storeDial, Logger: lg})
	ctl, err := mover.NewControl(mover.ControlConfig{Directory: s.dir, Sizes: s.pool, Logger: lg, Loads: s.load, BalanceBy: cfg.BalanceBy})
	if err != nil {
		return nil, err
	}
	// Node and plan state for alerts and dashboards, read at each scrape.
	s.reg.MustRegister(mover.NewStatusCollector(s.dir, ctl, cfg.RequestTimeout, lg))
	// The replica sets against the policy and the zone rule, the same way.
	s.reg.MustRegister(directory.NewReplicaCollector(s.dir, cfg.RequestTimeout, lg))
	if !cfg.DisableMover {
		ec := mover.ExecutorConfig{
			Directory: s.dir, Control: ctl, Etcd: s.cli, Stores: s.pool, Name: cfg.Name, Logger: lg, Registerer: s.reg,
			Parallelism: cfg.MoveParallelism, MoveRetryFor: cfg.MoveRetryFor,
		}
		// The automatic balancer, a part of the mover's leader: it runs only
		// while this slotd leads, with the leader's context.
		bal, err := mover.NewBalancer(mover.BalancerConfig{
			Directory: s.dir, Control: ctl, Name: cfg.Name, Tick: cfg.BalancerTick, Load: s.load, Logger: lg, Registerer: s.reg,
		})
		if err != nil {
			return nil, err
		}
		ec.LeaderParts = append(ec.LeaderParts, bal)
		if cfg.TuneMover != nil {
			cfg.TuneMover(&ec)
		}
		if s.exe, err = mover.NewExecutor(ec); err != nil {
			return nil, err
		}
	}

	s.az, err = auth.New(auth.Config{
		Policy: grpcapi.Policy(), ClientCerts: s.ts != nil && srvTLS.VerifiesClientCerts(),
		TokenFile: cfg.TokenFile, RequireNodeIdentity: cfg.RequireNodeIdentity, Logger: lg, Registerer: s.reg,
	})
	if err != nil {
		return nil, err
	}
	sc := grpcapi.Config{
		Directory: s.dir, Hub: s.hub, Load: s.load, Control: ctl, ServerID: cfg.Name,
		Authenticated: s.az.Enabled(), Logger: lg, Registerer: s.reg,
	}
	if s.exe != nil {
		sc.Mover = s.exe
	}
	if s.svc, err = grpcapi.New(sc); err != nil {
		return nil, err
	}

	// Authorization first, so a refused call runs nothing else; then the
	// request metrics (slotd_grpc_server_*; the auth interceptor counts
	// refusals in slotd_auth_requests_total).
	rpcMetrics := grpcprom.NewServerMetrics()
	if err := prometheus.WrapRegistererWithPrefix("slotd_", s.reg).Register(rpcMetrics); err != nil {
		return nil, fmt.Errorf("register gRPC metrics: %w", err)
	}
	opts := append(grpcapi.ServerOptions(), s.az.ServerOptions()...)
	opts = append(opts, grpc.ChainUnaryInterceptor(rpcMetrics.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(rpcMetrics.StreamServerInterceptor()))
	opts = append(opts, auth.Limits{MaxRecvMsgSize: cfg.MaxRecvBytes}.ServerOptions()...)
	opts = append(opts,
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		// Clients may ping idle connections (watch streams are long and
		// quiet), but not more than every 10s.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	if s.ts != nil {
		opts = append(opts, grpc.Creds(s.ts.Credentials()))
	}
	s.gs = grpc.NewServer(opts...)
	s.svc.Register(s.gs)
	s.hs = health.NewServer()
	healthpb.RegisterHealthServer(s.gs, s.hs)
	reflection.Register(s.gs)
	rpcMetrics.InitializeMetrics(s.gs)
	if m := grpcapi.Policy().Uncovered(s.gs.GetServiceInfo()); len(m) > 0 {
		return nil, fmt.Errorf("auth policy has no rule for %v; they would be refused to everyone", m)
	}

	if s.lis, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("gRPC listener: %w", err)
	}
	if cfg.HTTP != "" {
		if s.hlis, err = net.Listen("tcp", cfg.HTTP); err != nil {
			return nil, fmt.Errorf("HTTP listener: %w", err)
		}
		// The web console (/ui/ and its JSON under /api/v1/) shares the
		// port and, with roles on, gRPC's identities and policy; its load
		// is this replica's aggregate of the stores' reports.
		ui, err := console.New(console.Config{Source: consoleSource{hub: s.hub, svc: s.svc, dir: s.dir}, Load: consoleLoad{s.load},
			Authorizer: s.az, Logger: lg})
		if err != nil {
			return nil, err
		}
		s.hsrv = &http.Server{Handler: httpMux(s.reg, s.dir, s.hub, ui), ReadHeaderTimeout: 10 * time.Second,
			// Failed handshakes and the like: debug, not stderr.
			ErrorLog: slog.NewLogLogger(lg.Handler(), slog.LevelDebug)}
		if s.ts != nil {
			s.hsrv.TLSConfig = s.ts.TLSConfig()
		}
	}
	return s, nil
}

// GRPCAddr returns the address the gRPC API listens on (with the port
// picked when Config.Listen asked for port 0).
func (s *Server) GRPCAddr() string { return s.lis.Addr().String() }

// HTTPAddr returns the address of /metrics, /healthz and /readyz, or ""
// when Config.HTTP disabled them.
func (s *Server) HTTPAddr() string {
	if s.hlis == nil {
		return ""
	}
	return s.hlis.Addr().String()
}

// EtcdEndpoints returns the etcd client URLs slotd uses: the embedded
// member's, or Config.EtcdEndpoints.
func (s *Server) EtcdEndpoints() []string { return append([]string(nil), s.endpoints...) }

// ClusterID returns the etcd cluster id that names the cluster in every map.
func (s *Server) ClusterID() string { return s.clusterID }

// TLS returns the listeners' TLS files, to reload them (on SIGHUP in
// cmd/slotd; they are also re-read on their own when they change), or nil
// when slotd serves plaintext.
func (s *Server) TLS() *tlsconf.Server { return s.ts }

// Run serves until ctx ends or a part fails, then shuts down in order (see
// below) and returns; a clean stop returns nil. Run serves once: a second
// call returns an error. Close releases the rest afterwards.
func (s *Server) Run(ctx context.Context) error {
	err := errors.New("server: Run called twice")
	s.runOnce.Do(func() {
		s.served = true
		err = s.run(ctx)
	})
	return err
}

func (s *Server) run(ctx context.Context) error {
	cfg, lg := s.cfg, s.lg
	gs, hs, hsrv := s.gs, s.hs, s.hsrv
	if host, _, err := net.SplitHostPort(s.lis.Addr().String()); err == nil && !s.az.Enabled() {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			lg.Warn("authorization is off and gRPC listens beyond loopback: anyone who reaches it can rewrite the directory; give --tls-ca (client certificates) or --token-file", "listen", s.lis.Addr().String())
		}
	}
	lg.Info("slotd serving", append([]any{"grpc", s.lis.Addr().String(), "http", cfg.HTTP, "etcd", s.endpoints,
		"name", cfg.Name, "cluster", s.clusterID, "tls", s.ts != nil, "auth", s.az.Enabled()}, cfg.ServingLogAttrs...)...)

	// Each part runs under its own context so that shutdown can stop them
	// in order, not all at once.
	hubCtx, stopHub := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHub()
	exeCtx, stopExe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopExe()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ignoreCanceled(s.svc.Run(hubCtx)) })
	if s.exe != nil {
		g.Go(func() error { return s.exe.Run(exeCtx) })
	}
	g.Go(func() error {
		// A stop that comes before Serve starts is still a clean stop.
		if err := gs.Serve(s.lis); !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
		return nil
	})
	if hsrv != nil {
		g.Go(func() error {
			var err error
			if s.ts != nil {
				err = hsrv.ServeTLS(s.hlis, "", "")
			} else {
				err = hsrv.Serve(s.hlis)
			}
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		})
	}
	if s.member != nil {
		g.Go(func() error {
			select {
			case <-gctx.Done():
				return nil
			case err := <-s.member.Err():
				return fmt.Errorf("embedded etcd: %w", err)
			}
		})
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	g.Go(func() error { followReadiness(gctx, hs, s.dir, lg); return nil })
	g.Go(func() error {
		<-gctx.Done()
		lg.Info("slotd shutting down")
		// Shutdown order:
		//  1. stop accepting: health says NOT_SERVING, the listeners close,
		//     new RPCs are refused; running RPCs go on;
		//  2. end the watch streams: the hub stops, every WatchMap returns
		//     UNAVAILABLE so clients move to another replica, and the gRPC
		//     server finishes once the last RPC returns (or is cut after
		//     ShutdownTimeout);
		//  3. stop the mover executor (it resigns leadership; a move in
		//     flight resumes on the next leader);
		//  4. close the store pool and the etcd client (Close, after Run);
		//  5. close the embedded etcd (Close, last of all).
		hs.Shutdown()
		stopped := make(chan struct{})
		go func() { gs.GracefulStop(); close(stopped) }()
		if hsrv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			_ = hsrv.Shutdown(sctx)
			cancel()
		}
		stopHub()
		select {
		case <-stopped:
		case <-time.After(cfg.ShutdownTimeout):
			lg.Warn("RPCs still running after the shutdown timeout; cutting them", "timeout", cfg.ShutdownTimeout)
			gs.Stop()
			<-stopped
		}
		stopExe()
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	lg.Info("slotd stopped")
	return nil
}

// Close releases what New built, in this order: the listeners if Run never
// served them, the store pool, the etcd client, the embedded etcd. Call it
// after Run returned (or instead of Run); it is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		// A Run that has not started yet must not start after Close.
		s.runOnce.Do(func() {})
		if !s.served {
			if s.gs != nil {
				s.gs.Stop()
			}
			if s.lis != nil {
				s.lis.Close()
			}
			if s.hlis != nil {
				s.hlis.Close()
			}
		}
		if s.pool != nil {
			s.pool.Close()
		}
		if s.cli != nil {
			s.cli.Close()
		}
		if s.member != nil {
			s.member.Close()
		}
	})
}
