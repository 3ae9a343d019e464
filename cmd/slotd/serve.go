package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/embedetcd"
	"github.com/slotd/slotd/internal/flagenv"
	"github.com/slotd/slotd/internal/gcpercent"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/service"
	"github.com/slotd/slotd/tlsconf"
)

// options are the flags of `slotd` (serve).
type options struct {
	dataDir        string
	etcdEndpoints  []string
	etcdClientURL  string
	etcdPeerURL    string
	listen         string
	httpAddr       string
	name           string
	logLevel       string
	tlsCert        string
	tlsKey         string
	tlsCA          string
	clientAuth     string
	tokenFile      string
	requireNodeID  bool
	etcdTLSCert    string
	etcdTLSKey     string
	etcdTLSCA      string
	storeTLSCert   string
	storeTLSKey    string
	requestTimeout time.Duration
	downAfter      time.Duration
	holdDown       time.Duration
	maxRecvBytes   int
	shutdown       time.Duration
	parallelism    int
}

func (o *options) validate() error {
	switch {
	case o.listen == "":
		return usageError{errors.New("--listen is required")}
	case len(o.etcdEndpoints) == 0 && o.dataDir == "":
		return usageError{errors.New("--data-dir is required for the embedded etcd (or give --etcd-endpoints)")}
	case o.tokenFile != "" && o.tlsCert == "":
		return usageError{errors.New("--token-file needs --tls-cert and --tls-key: bearer tokens must not cross plaintext")}
	case o.requireNodeID && o.tlsCA == "" && o.tokenFile == "":
		return usageError{errors.New("--require-node-identity needs identities: give --tls-ca (client certificates) or --token-file")}
	case len(o.etcdEndpoints) == 0 && (o.etcdTLSKey != "" || o.etcdTLSCA != "") && o.etcdTLSCert == "":
		return usageError{errors.New("the embedded etcd serves TLS with --etcd-tls-cert and --etcd-tls-key (a server and client certificate, like certs/server.pem); --etcd-tls-ca alone is not enough")}
	case o.requestTimeout <= 0 || o.downAfter <= 0 || o.holdDown < 0 || o.shutdown <= 0:
		return usageError{errors.New("--request-timeout, --down-after and --shutdown-timeout must be positive, --hold-down not negative")}
	case o.maxRecvBytes < 0:
		return usageError{errors.New("--max-recv-bytes must not be negative")}
	case o.parallelism < 1 || o.parallelism > mover.MaxParallelism:
		return usageError{fmt.Errorf("--move-parallelism %d is not in 1-%d", o.parallelism, mover.MaxParallelism)}
	}
	return nil
}

func defaultName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "slotd"
	}
	return h + "-" + strconv.Itoa(os.Getpid())
}

func newServeCmd(stderr io.Writer) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "slotd",
		Short: "slotd control plane: the slot directory's gRPC API, the mover, metrics",
		Long: `slotd serves the slot directory (gRPC on --listen: Directory for clients and
store nodes, Admin for slotctl), runs the mover (one leader per cluster, elected
through etcd) and serves /metrics, /healthz and /readyz on --http.

It starts an embedded single-member etcd in --data-dir unless --etcd-endpoints
names an existing etcd cluster, and applies pending directory schema migrations
at start. slotd keeps no state of its own: several replicas may share one etcd.

Every flag is also an environment variable: --data-dir is SLOTD_DATA_DIR.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagenv.Bind(cmd.Flags(), envPrefix); err != nil {
				return usageError{err}
			}
			return o.validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context(), &o, stderr) },
	}
	silence(cmd)
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", "slotd-data", "the embedded etcd's data directory")
	f.StringSliceVar(&o.etcdEndpoints, "etcd-endpoints", nil, "existing etcd cluster, comma-separated URLs; no embedded etcd then")
	f.StringVar(&o.etcdClientURL, "etcd-client-url", "127.0.0.1:7479", "the embedded etcd's client URL")
	f.StringVar(&o.etcdPeerURL, "etcd-peer-url", "127.0.0.1:7480", "the embedded etcd's peer URL")
	f.StringVar(&o.listen, "listen", "127.0.0.1:7400", "gRPC listen address")
	f.StringVar(&o.httpAddr, "http", "127.0.0.1:7401", "HTTP listen address for /metrics, /healthz, /readyz; empty to disable")
	f.StringVar(&o.name, "name", defaultName(), "this replica's id in the mover election and in status")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.tlsCert, "tls-cert", "", "certificate (PEM) of the gRPC and HTTP listeners; enables TLS")
	f.StringVar(&o.tlsKey, "tls-key", "", "private key (PEM) for --tls-cert")
	f.StringVar(&o.tlsCA, "tls-ca", "", "CA (PEM) that verifies client certificates (roles) and store nodes")
	f.StringVar(&o.clientAuth, "client-auth", "", "client certificates: none, request or require (default: request with --tls-ca, else none)")
	f.StringVar(&o.tokenFile, "token-file", "", `bearer tokens, one "token role[,role][,node:ID] [name]" a line; needs TLS`)
	f.BoolVar(&o.requireNodeID, "require-node-identity", false, "refuse registration and heartbeats from a store identity bound to no node id (certificate URI SAN spiffe://slotd/node/ID, or token item node:ID); bound identities act only as their own node either way")
	f.StringVar(&o.etcdTLSCert, "etcd-tls-cert", "", "client certificate (PEM) for --etcd-endpoints; without them, the embedded etcd serves TLS (https) with it and slotd presents it as its client certificate")
	f.StringVar(&o.etcdTLSKey, "etcd-tls-key", "", "private key (PEM) for --etcd-tls-cert")
	f.StringVar(&o.etcdTLSCA, "etcd-tls-ca", "", "CA (PEM) that verifies the etcd servers; the embedded etcd then requires client certificates from it")
	f.StringVar(&o.storeTLSCert, "store-tls-cert", "", "client certificate (PEM, role store) the mover presents to store nodes; TLS to stores uses --tls-ca")
	f.StringVar(&o.storeTLSKey, "store-tls-key", "", "private key (PEM) for --store-tls-cert")
	f.DurationVar(&o.requestTimeout, "request-timeout", directory.DefaultRequestTimeout, "deadline of each etcd request")
	f.DurationVar(&o.downAfter, "down-after", directory.DefaultDownAfter, "a node without heartbeats this long is marked down")
	f.DurationVar(&o.holdDown, "hold-down", directory.DefaultHoldDown, "a node that came back stays down this long (flap damping)")
	f.IntVar(&o.maxRecvBytes, "max-recv-bytes", auth.DefaultMaxRecvMsgSize, "largest gRPC request accepted, in bytes")
	f.DurationVar(&o.shutdown, "shutdown-timeout", 10*time.Second, "how long shutdown waits for RPCs before cutting them")
	f.IntVar(&o.parallelism, "move-parallelism", 1, "moves of a plan the mover runs at once (a move that ends makes room for the next); 1 moves one slot at a time. The throttle stays per donor")
	flagenv.Annotate(f, envPrefix)
	return cmd
}

// serve runs slotd until ctx ends or a part fails.
func serve(ctx context.Context, o *options, stderr io.Writer) (err error) {
	lg, err := newLogger(stderr, o.logLevel)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// TLS material first: a bad file should stop slotd before it touches etcd.
	srvTLS := tlsconf.Config{CertFile: o.tlsCert, KeyFile: o.tlsKey, CAFile: o.tlsCA, ClientAuth: tlsconf.ClientAuth(o.clientAuth), Logger: lg}
	if srvTLS.Enabled() && o.tlsCert == "" {
		return usageError{errors.New("--tls-ca and --client-auth need --tls-cert and --tls-key")}
	}
	var ts *tlsconf.Server
	if srvTLS.Enabled() {
		if ts, err = tlsconf.NewServer(srvTLS); err != nil {
			return err
		}
	}

	// The etcd client: embedded member or an external cluster.
	endpoints := o.etcdEndpoints
	var member *embedetcd.Server
	if len(endpoints) == 0 {
		// With --etcd-tls-cert the member serves TLS on both listeners with
		// those files, and slotd dials it with the same ones (below).
		var etcdTLS tlsconf.Config
		scheme := "http"
		if o.etcdTLSCert != "" {
			etcdTLS = tlsconf.Config{CertFile: o.etcdTLSCert, KeyFile: o.etcdTLSKey, CAFile: o.etcdTLSCA, Logger: lg}
			scheme = "https"
		}
		member, err = embedetcd.Start(ctx, embedetcd.Config{
			DataDir: o.dataDir, ClientURL: etcdURL(o.etcdClientURL, scheme), PeerURL: etcdURL(o.etcdPeerURL, scheme),
			ClientTLS: etcdTLS, PeerTLS: etcdTLS, Logger: lg,
		})
		if err != nil {
			return err
		}
		// 5. close the embedded etcd, last of all (see the shutdown order below).
		defer member.Close()
		endpoints = member.Endpoints()
	}
	cc := clientv3.Config{Endpoints: endpoints, DialTimeout: o.requestTimeout, Logger: nopZap()}
	if o.etcdTLSCert != "" || o.etcdTLSKey != "" || o.etcdTLSCA != "" {
		etc, err := tlsconf.NewClient(tlsconf.Config{CertFile: o.etcdTLSCert, KeyFile: o.etcdTLSKey, CAFile: o.etcdTLSCA, Logger: lg})
		if err != nil {
			return fmt.Errorf("etcd TLS: %w", err)
		}
		etc.ConfigureEtcd(&cc)
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	// 4. close the etcd client, after every part using it has stopped.
	defer cli.Close()

	dir, err := directory.New(directory.Config{
		Client: cli, Logger: lg, Registerer: reg,
		RequestTimeout: o.requestTimeout, DownAfter: o.downAfter, HoldDown: o.holdDown,
	})
	if err != nil {
		return err
	}
	if err := applyMigrations(ctx, dir, lg); err != nil {
		return err
	}
	clusterID, err := etcdClusterID(ctx, cli, o.requestTimeout)
	if err != nil {
		return err
	}

	storeDial, err := storeDialOptions(o, lg)
	if err != nil {
		return err
	}
	pool := mover.NewStorePool(mover.PoolConfig{DialOptions: storeDial, Logger: lg})
	defer pool.Close()
	ctl, err := mover.NewControl(mover.ControlConfig{Directory: dir, Sizes: pool, Logger: lg})
	if err != nil {
		return err
	}
	// Node and plan state for alerts and dashboards, read at each scrape.
	reg.MustRegister(mover.NewStatusCollector(dir, ctl, o.requestTimeout, lg))
	exe, err := mover.NewExecutor(mover.ExecutorConfig{
		Directory: dir, Control: ctl, Etcd: cli, Stores: pool, Name: o.name, Logger: lg, Registerer: reg,
		Parallelism: o.parallelism,
	})
	if err != nil {
		return err
	}

	az, err := auth.New(auth.Config{
		Policy: service.Policy(), ClientCerts: ts != nil && srvTLS.VerifiesClientCerts(),
		TokenFile: o.tokenFile, RequireNodeIdentity: o.requireNodeID, Logger: lg, Registerer: reg,
	})
	if err != nil {
		return err
	}
	svc, err := service.New(service.Config{
		Directory: dir, Control: ctl, Mover: exe, ClusterID: clusterID, ServerID: o.name,
		Authenticated: az.Enabled(), HeartbeatTTL: o.downAfter, Logger: lg, Registerer: reg,
	})
	if err != nil {
		return err
	}

	// Authorization first, so a refused call runs nothing else; then the
	// request metrics (slotd_grpc_server_*; the auth interceptor counts
	// refusals in slotd_auth_requests_total).
	rpcMetrics := grpcprom.NewServerMetrics()
	if err := prometheus.WrapRegistererWithPrefix("slotd_", reg).Register(rpcMetrics); err != nil {
		return fmt.Errorf("register gRPC metrics: %w", err)
	}
	opts := append(service.ServerOptions(), az.ServerOptions()...)
	opts = append(opts, grpc.ChainUnaryInterceptor(rpcMetrics.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(rpcMetrics.StreamServerInterceptor()))
	opts = append(opts, auth.Limits{MaxRecvMsgSize: o.maxRecvBytes}.ServerOptions()...)
	opts = append(opts,
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		// Clients may ping idle connections (watch streams are long and
		// quiet), but not more than every 10s.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	if ts != nil {
		opts = append(opts, grpc.Creds(ts.Credentials()))
	}
	gs := grpc.NewServer(opts...)
	svc.Register(gs)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	rpcMetrics.InitializeMetrics(gs)
	if m := service.Policy().Uncovered(gs.GetServiceInfo()); len(m) > 0 {
		return fmt.Errorf("auth policy has no rule for %v; they would be refused to everyone", m)
	}

	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("gRPC listener: %w", err)
	}
	var hsrv *http.Server
	var hlis net.Listener
	if o.httpAddr != "" {
		if hlis, err = net.Listen("tcp", o.httpAddr); err != nil {
			lis.Close()
			return fmt.Errorf("HTTP listener: %w", err)
		}
		hsrv = &http.Server{Handler: httpMux(reg, dir, svc), ReadHeaderTimeout: 10 * time.Second}
		if ts != nil {
			hsrv.TLSConfig = ts.TLSConfig()
		}
	}
	if host, _, err := net.SplitHostPort(lis.Addr().String()); err == nil && !az.Enabled() {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			lg.Warn("authorization is off and gRPC listens beyond loopback: anyone who reaches it can rewrite the directory; give --tls-ca (client certificates) or --token-file", "listen", lis.Addr().String())
		}
	}
	lg.Info("slotd serving", "grpc", lis.Addr().String(), "http", o.httpAddr, "etcd", endpoints,
		"name", o.name, "cluster", clusterID, "tls", ts != nil, "auth", az.Enabled(), "gogc", gcpercent.Apply())

	// Each part runs under its own context so that shutdown can stop them
	// in order, not all at once.
	hubCtx, stopHub := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHub()
	exeCtx, stopExe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopExe()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ignoreCanceled(svc.Run(hubCtx)) })
	g.Go(func() error { return exe.Run(exeCtx) })
	g.Go(func() error {
		// A stop that comes before Serve starts is still a clean stop.
		if err := gs.Serve(lis); !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
		return nil
	})
	if hsrv != nil {
		g.Go(func() error {
			var err error
			if ts != nil {
				err = hsrv.ServeTLS(hlis, "", "")
			} else {
				err = hsrv.Serve(hlis)
			}
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		})
	}
	if member != nil {
		g.Go(func() error {
			select {
			case <-gctx.Done():
				return nil
			case err := <-member.Err():
				return fmt.Errorf("embedded etcd: %w", err)
			}
		})
	}
	if ts != nil {
		g.Go(func() error { reloadOnHUP(gctx, ts, lg); return nil })
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	g.Go(func() error { followReadiness(gctx, hs, dir, lg); return nil })
	g.Go(func() error {
		<-gctx.Done()
		lg.Info("slotd shutting down")
		// Shutdown order:
		//  1. stop accepting: health says NOT_SERVING, the listeners close,
		//     new RPCs are refused; running RPCs go on;
		//  2. end the watch streams: the hub stops, every WatchMap returns
		//     UNAVAILABLE so clients move to another replica, and the gRPC
		//     server finishes once the last RPC returns (or is cut after
		//     --shutdown-timeout);
		//  3. stop the mover executor (it resigns leadership; a move in
		//     flight resumes on the next leader);
		//  4. close the etcd client (deferred in serve, after g.Wait);
		//  5. close the embedded etcd (deferred first, so it runs last).
		hs.Shutdown()
		stopped := make(chan struct{})
		go func() { gs.GracefulStop(); close(stopped) }()
		if hsrv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), o.shutdown)
			_ = hsrv.Shutdown(sctx)
			cancel()
		}
		stopHub()
		select {
		case <-stopped:
		case <-time.After(o.shutdown):
			lg.Warn("RPCs still running after the shutdown timeout; cutting them", "timeout", o.shutdown)
			gs.Stop()
			<-stopped
		}
		stopExe()
		return nil
	})
	err = g.Wait()
	if err != nil {
		return err
	}
	lg.Info("slotd stopped")
	return nil
}

// reloadOnHUP re-reads the listener's certificate files on SIGHUP (they are
// also re-read on their own every few seconds when they change).
func reloadOnHUP(ctx context.Context, ts *tlsconf.Server, lg *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := ts.Reload(); err != nil {
				lg.Error("TLS reload failed; the previous certificates stay in use", "err", err)
			} else {
				lg.Info("TLS certificates reloaded")
			}
		}
	}
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// etcdClusterID names the cluster in every map: replicas over one etcd
// agree on it, and a client never mixes maps of two etcd clusters.
func etcdClusterID(ctx context.Context, cli *clientv3.Client, timeout time.Duration) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := cli.MemberList(rctx)
	if err != nil {
		return "", fmt.Errorf("%w: read the etcd cluster id: %w", directory.ErrUnavailable, err)
	}
	return fmt.Sprintf("%x", resp.Header.GetClusterId()), nil
}

// storeDialOptions are how the mover reaches store nodes: TLS (with a
// store-role client certificate when given) when slotd has a CA, else
// plaintext.
func storeDialOptions(o *options, lg *slog.Logger) ([]grpc.DialOption, error) {
	if o.tlsCA == "" && o.storeTLSCert == "" {
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	tc, err := tlsconf.NewClient(tlsconf.Config{CertFile: o.storeTLSCert, KeyFile: o.storeTLSKey, CAFile: o.tlsCA, Logger: lg})
	if err != nil {
		return nil, fmt.Errorf("store TLS: %w", err)
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(tc.Credentials())}, nil
}

// ready reports why slotd cannot serve, or nil: etcd must answer within
// two seconds and hold a directory schema this binary supports.
func ready(ctx context.Context, dir *directory.Directory) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	schema, err := dir.Schema(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("etcd: %w", err)
	case schema == 0 || schema > directory.SchemaVersion:
		return fmt.Errorf("directory schema %d, this slotd supports 1-%d", schema, directory.SchemaVersion)
	}
	return nil
}

// followReadiness keeps the gRPC health status in step with ready, so a
// load balancer checking health stops sending to a replica cut off from
// etcd. It returns when ctx ends.
func followReadiness(ctx context.Context, hs *health.Server, dir *directory.Directory, lg *slog.Logger) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	serving := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := ready(ctx, dir)
		if ctx.Err() != nil {
			return
		}
		if (err == nil) != serving {
			serving = err == nil
			st := healthpb.HealthCheckResponse_SERVING
			if !serving {
				st = healthpb.HealthCheckResponse_NOT_SERVING
				lg.Warn("not ready; health says NOT_SERVING", "err", err)
			} else {
				lg.Info("ready again; health says SERVING")
			}
			hs.SetServingStatus("", st)
		}
	}
}

// httpMux serves /metrics, /healthz (the process runs) and /readyz (etcd
// answers and holds a schema this binary supports).
func httpMux(reg *prometheus.Registry, dir *directory.Directory, svc *service.Service) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context(), dir); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		v := uint64(0)
		if m := svc.Hub().Current(); m != nil {
			v = m.Version()
		}
		fmt.Fprintf(w, "ready: map version %d\n", v)
	})
	return mux
}
