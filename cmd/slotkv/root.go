package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/internal/buildinfo"
	"github.com/slotd/slotd/internal/flagenv"
	"github.com/slotd/slotd/internal/gcpercent"
	"github.com/slotd/slotd/internal/replicas"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slotkv"
)

const envPrefix = "SLOTKV_"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // could not start, or failed while running
	exitUsage   = 2 // bad flags
)

type usageError struct{ error }

// options are slotkv's flags.
type options struct {
	id         string
	listen     string
	advertise  string
	httpAddr   string
	dataDir    string
	zone       string
	weight     uint32
	slotd      string
	standalone bool
	fsync      bool
	exportRate int64
	loadReport time.Duration
	logLevel   string
	tls        tlsOptions

	reconcileInterval time.Duration
	reconcileGrace    time.Duration
}

func (o *options) validate() error {
	switch {
	case o.id == "":
		return usageError{errors.New("--id is required: the node's stable name in the directory")}
	case o.dataDir == "":
		return usageError{errors.New("--data-dir is required")}
	case o.slotd == "" && !o.standalone:
		return usageError{errors.New("--slotd is empty: give slotd's address, or --standalone to own every slot without slotd")}
	case o.exportRate < 0:
		return usageError{errors.New("--export-rate must not be negative")}
	case o.loadReport < time.Second || o.loadReport > 10*time.Minute:
		return usageError{fmt.Errorf("--load-report-interval %v: want 1s to 10m", o.loadReport)}
	case o.reconcileInterval <= 0 || o.reconcileGrace < 0:
		return usageError{errors.New("--reconcile-interval must be positive, --reconcile-grace not negative")}
	}
	return o.tls.validate()
}

// errVersionShown ends a run that only printed the version.
var errVersionShown = errors.New("version shown")

// versionOut receives --version (tests replace it).
var versionOut io.Writer = os.Stdout

func run(ctx context.Context, args []string, stderr io.Writer) int {
	var o options
	var showVersion bool
	cmd := &cobra.Command{
		Use:   "slotkv",
		Short: "slotd's reference store node: a durable key-value store whose slots slotd can move",
		Long: `slotkv serves a key-value API (Get, Put, Delete, CompareAndSet on a version)
and slotd's Store migration protocol on one gRPC port, and Prometheus metrics on
/metrics of its HTTP port. It registers with slotd, keeps its session alive, and
answers MOVED for slots it does not own.

Durability: with --fsync (the default) every acknowledged write is on disk;
--fsync=false acknowledges writes once in the OS page cache (survives a process
crash, not a machine crash).

Security: --tls-cert/--tls-key serve TLS on both ports; --tls-ca verifies
client certificates (--client-auth require for mutual TLS) and --token-file
accepts bearer tokens. Authorization is then on: the Store migration protocol
needs role store (slotd's mover presents --store-tls-cert), the KV API role
read (any application, admin or store identity). slotkv reaches slotd over
TLS with --slotd-tls-ca (default --tls-ca) and a store identity:
--slotd-tls-cert/--slotd-tls-key or --slotd-token-file.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				return errVersionShown
			}
			if err := flagenv.Bind(cmd.Flags(), envPrefix); err != nil {
				return usageError{err}
			}
			return o.validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context(), &o, stderr) },
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	f := cmd.Flags()
	// Not cobra's own --version: it prints where help goes (stderr here),
	// and a version belongs on stdout.
	f.BoolVar(&showVersion, "version", false, "print slotkv's version and exit")
	f.StringVar(&o.id, "id", "", "node id: a stable name, never an address")
	f.StringVar(&o.listen, "listen", "127.0.0.1:7500", "gRPC listen address (KV and Store services)")
	f.StringVar(&o.advertise, "advertise", "", "address clients and slotd use to reach this node (default: --listen)")
	f.StringVar(&o.httpAddr, "http", "127.0.0.1:7501", "HTTP listen address for /metrics, /healthz and /readyz; empty to disable")
	f.StringVar(&o.dataDir, "data-dir", "slotkv-data", "directory for the data file and the node's fences and change logs")
	f.StringVar(&o.zone, "zone", "", "failure zone, for the planner")
	f.Uint32Var(&o.weight, "weight", 1, "relative share of slots")
	f.StringVar(&o.slotd, "slotd", "127.0.0.1:7400", "slotd gRPC addresses, comma-separated: the map, registration and heartbeats use any replica that answers")
	f.BoolVar(&o.standalone, "standalone", false, "own every slot and do not contact slotd (single-node tests and benchmarks)")
	f.BoolVar(&o.fsync, "fsync", true, "fsync every commit before acknowledging it")
	f.Int64Var(&o.exportRate, "export-rate", 0, "initial export throttle in bytes/s (0: unlimited; the mover sets it per move)")
	f.DurationVar(&o.loadReport, "load-report-interval", node.DefaultReportInterval, "how often to send the node's measured load to every slotd in --slotd (1s-10m; slotd takes a node as unknown after three missed reports)")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.DurationVar(&o.reconcileInterval, "reconcile-interval", node.DefaultReconcileInterval, "how often the node compares what it holds with the map and cleans up what nothing explains")
	f.DurationVar(&o.reconcileGrace, "reconcile-grace", node.DefaultReconcileGrace, "how long a left copy, capture or fence must stay unexplained before reconciliation cleans it up")
	o.tls.bind(f)
	flagenv.Annotate(f, envPrefix)
	cmd.AddCommand(clientCommands()...)
	cmd.SetArgs(args)
	cmd.SetOut(stderr)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errVersionShown):
		fmt.Fprintf(versionOut, "slotkv %s\n", buildinfo.Read())
		return exitOK
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "slotkv: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "slotkv: %v\n", err)
		return exitFailure
	}
}

// serve runs the node until ctx is done.
func serve(ctx context.Context, o *options, stderr io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return usageError{fmt.Errorf("--log-level: %w", err)}
	}
	lg := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// TLS material first: a bad file should stop slotkv before it opens
	// its data.
	ts, az, err := o.tls.listener(lg, reg)
	if err != nil {
		return err
	}
	slotdDial, err := o.tls.slotdDialOptions(lg)
	if err != nil {
		return err
	}

	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	defer lis.Close()
	advertise := o.advertise
	if advertise == "" {
		advertise = lis.Addr().String()
		if ap, err := netip.ParseAddrPort(advertise); err == nil && ap.Addr().IsUnspecified() {
			return usageError{fmt.Errorf("--listen %s is on every interface; give --advertise, the address others reach this node at", o.listen)}
		}
	}

	var maps mapSource
	var conn *grpc.ClientConn
	if o.standalone {
		m := new(node.StaticMap)
		m.SetAll(o.id, advertise)
		maps = staticSource{m}
	} else {
		endpoints := strings.Split(o.slotd, ",")
		// One channel over every replica: registration and heartbeats go
		// through whichever answers (internal/replicas).
		conn, err = replicas.Dial("slotkv", endpoints, slotdDial...)
		if err != nil {
			return fmt.Errorf("slotd addresses %q: %w", o.slotd, err)
		}
		defer conn.Close()
		cm, err := node.NewClusterMap(client.Options{Endpoints: endpoints, DialOptions: slotdDial, Logger: lg, Registerer: reg})
		if err != nil {
			return usageError{err}
		}
		maps = cm
	}

	// The load report goes to every replica on a channel of its own (the
	// shared channel talks to one at a time): each keeps its own aggregate.
	var loadClients []slotdv1.LoadClient
	if conn != nil {
		for _, ep := range strings.Split(o.slotd, ",") {
			lc, err := replicas.Dial("slotkv-load", []string{ep}, slotdDial...)
			if err != nil {
				return fmt.Errorf("slotd address %q: %w", ep, err)
			}
			defer lc.Close()
			loadClients = append(loadClients, slotdv1.NewLoadClient(lc))
		}
	}

	var fresh node.FreshMapFunc
	if conn != nil {
		rc := slotdv1.NewRecoveryClient(conn)
		fresh = func(ctx context.Context) (*slotmap.Map, error) {
			resp, err := rc.FreshMap(ctx, &slotdv1.FreshMapRequest{})
			if err != nil {
				return nil, err
			}
			return slotmap.FromProto(resp.GetMap())
		}
	}
	// A node in a cluster serves its slots only while it holds its lease
	// from slotd (the registrar renews it); a standalone one has no slotd.
	var lease *node.Lease
	if conn != nil {
		lease = node.NewLease(o.id, nil, lg)
	}
	srv, err := slotkv.Open(slotkv.Config{
		ID: o.id, DataDir: o.dataDir, Map: maps, NoSync: !o.fsync, Lease: lease,
		ExportBytesPerSecond: o.exportRate, Logger: lg, Registerer: reg,
		ReconcileInterval: o.reconcileInterval, ReconcileGrace: o.reconcileGrace, FreshMap: fresh,
	})
	if err != nil {
		return err
	}

	var registrar *node.Registrar
	if conn != nil {
		registrar, err = node.NewRegistrar(node.RegistrarConfig{
			Admin:  slotdv1.NewAdminClient(conn),
			Node:   &slotdv1.Node{Id: o.id, Address: advertise, Zone: o.zone, Weight: o.weight},
			Logger: lg,
			// Every heartbeat carries what is left to clean up, and the node
			// never acts on a map from before its registration.
			OrphanBytes:  srv.Node().OrphanBytes,
			OnRegistered: srv.Node().RequireMapVersion,
			Lease:        lease,
		})
		if err != nil {
			srv.Close()
			return err
		}
	}
	var reporter *node.Reporter
	if len(loadClients) > 0 {
		reporter, err = node.NewReporter(node.ReporterConfig{Node: srv.Node(), Replicas: loadClients, Interval: o.loadReport, Logger: lg})
		if err != nil {
			srv.Close()
			return err
		}
	}
	g := grpc.NewServer(serverOptions(ts, az, srv.ServerOptions())...)
	srv.Register(g)
	ready := newReadiness(maps)
	healthpb.RegisterHealthServer(g, ready.hs)
	reflection.Register(g)
	if m := slotkv.Policy().Uncovered(g.GetServiceInfo()); len(m) > 0 {
		srv.Close()
		return fmt.Errorf("auth policy has no rule for %v; they would be refused to everyone", m)
	}
	warnIfOpen(lg, az, lis)

	var hs *http.Server
	httpAddr := ""
	httpDone := make(chan struct{})
	if o.httpAddr != "" {
		hl, err := net.Listen("tcp", o.httpAddr)
		if err != nil {
			srv.Close()
			return fmt.Errorf("listen on %s: %w", o.httpAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
		mux.HandleFunc("/readyz", ready.readyz)
		hs = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(lg.Handler(), slog.LevelDebug)}
		httpAddr = hl.Addr().String()
		if ts != nil {
			// The gRPC listener's TLS settings: no roles on HTTP (metrics
			// only), but with --client-auth require a scraper needs a
			// certificate from --tls-ca too.
			hs.TLSConfig = ts.TLSConfig()
			go func() { defer close(httpDone); _ = hs.ServeTLS(hl, "", "") }()
		} else {
			go func() { defer close(httpDone); _ = hs.Serve(hl) }()
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	eg, egCtx := errgroup.WithContext(runCtx)
	eg.Go(func() error { return srv.Run(egCtx) })
	eg.Go(func() error { return maps.Run(egCtx) })
	eg.Go(func() error { return ready.run(egCtx) })
	if reporter != nil {
		eg.Go(func() error { return reporter.Run(egCtx) })
	}
	if registrar != nil {
		eg.Go(func() error { return registrar.Run(egCtx) })
	}
	eg.Go(func() error {
		if err := g.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("grpc: %w", err)
		}
		return nil
	})
	lg.Info("slotkv serving", "id", o.id, "listen", lis.Addr().String(), "advertise", advertise, "http", httpAddr, "fsync", o.fsync, "standalone", o.standalone,
		"tls", ts != nil, "auth", az.Enabled(), "slotd_tls", !o.standalone && o.tls.slotdTLS(), "gogc", gcpercent.Apply())

	// Shutdown order: 1. stop taking requests and finish those in flight
	// (bounded), 2. stop background work, 3. close the HTTP server,
	// 4. close the data file.
	<-egCtx.Done()
	lg.Info("slotkv stopping")
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		g.Stop()
		<-stopped
	}
	cancel()
	err = eg.Wait()
	if hs != nil {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = hs.Shutdown(sctx)
		scancel()
		<-httpDone
	}
	return errors.Join(err, srv.Close())
}

// mapSource is a node.MapSource that may need a goroutine to stay fresh.
type mapSource interface {
	node.MapSource
	Run(ctx context.Context) error
	// Assigned reports whether slots have owners in the map held.
	Assigned() bool
}

type staticSource struct{ *node.StaticMap }

func (staticSource) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// Assigned implements mapSource: a standalone node owns every slot.
func (staticSource) Assigned() bool { return true }
