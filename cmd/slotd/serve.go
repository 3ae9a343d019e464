package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/internal/flagenv"
	"github.com/slotd/slotd/internal/gcpercent"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/tlsconf"
)

// newServeCmd is `slotd` (serve): its flags are the fields of server.Config.
func newServeCmd(stderr io.Writer) *cobra.Command {
	cfg, logLevel := server.DefaultConfig(), "info"
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
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context(), cfg, logLevel, stderr) },
	}
	silence(cmd)
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "the embedded etcd's data directory")
	f.StringSliceVar(&cfg.EtcdEndpoints, "etcd-endpoints", nil, "existing etcd cluster, comma-separated URLs; no embedded etcd then")
	f.StringVar(&cfg.EtcdPrefix, "etcd-prefix", cfg.EtcdPrefix, "key prefix of this cluster's directory in etcd (/name/ ...); clusters sharing one etcd need disjoint prefixes")
	f.StringVar(&cfg.EtcdClientURL, "etcd-client-url", cfg.EtcdClientURL, "the embedded etcd's client URL")
	f.StringVar(&cfg.EtcdPeerURL, "etcd-peer-url", cfg.EtcdPeerURL, "the embedded etcd's peer URL")
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "gRPC listen address")
	f.StringVar(&cfg.HTTP, "http", cfg.HTTP, "HTTP listen address for /metrics, /healthz, /readyz; empty to disable")
	f.StringVar(&cfg.Name, "name", cfg.Name, "this replica's id in the mover election and in status")
	f.StringVar(&logLevel, "log-level", logLevel, "debug, info, warn or error")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "certificate (PEM) of the gRPC and HTTP listeners; enables TLS")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "private key (PEM) for --tls-cert")
	f.StringVar(&cfg.TLSCA, "tls-ca", "", "CA (PEM) that verifies client certificates (roles) and store nodes")
	f.StringVar(&cfg.ClientAuth, "client-auth", "", "client certificates: none, request or require (default: request with --tls-ca, else none)")
	f.StringVar(&cfg.TokenFile, "token-file", "", `bearer tokens, one "token role[,role][,node:ID] [name]" a line; needs TLS`)
	f.BoolVar(&cfg.RequireNodeIdentity, "require-node-identity", cfg.RequireNodeIdentity, "refuse registration and heartbeats from a store identity bound to no node id (certificate URI SAN spiffe://slotd/node/ID, or token item node:ID); bound identities act only as their own node either way")
	f.StringVar(&cfg.EtcdTLSCert, "etcd-tls-cert", "", "client certificate (PEM) for --etcd-endpoints; without them, the embedded etcd serves TLS (https) with it and slotd presents it as its client certificate")
	f.StringVar(&cfg.EtcdTLSKey, "etcd-tls-key", "", "private key (PEM) for --etcd-tls-cert")
	f.StringVar(&cfg.EtcdTLSCA, "etcd-tls-ca", "", "CA (PEM) that verifies the etcd servers; the embedded etcd then requires client certificates from it")
	f.StringVar(&cfg.StoreTLSCert, "store-tls-cert", "", "client certificate (PEM, role store) the mover presents to store nodes; TLS to stores uses --tls-ca")
	f.StringVar(&cfg.StoreTLSKey, "store-tls-key", "", "private key (PEM) for --store-tls-cert")
	f.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "deadline of each etcd request")
	f.DurationVar(&cfg.DownAfter, "down-after", cfg.DownAfter, "a store's lease: one that could not renew it for this long, less --lease-margin, stops serving; slotd marks it down --lease-margin after it")
	f.DurationVar(&cfg.LeaseMargin, "lease-margin", cfg.LeaseMargin, "safety margin on each side of a store's lease, for clock rate drift and pauses (0: a tenth of --down-after; less than half of it)")
	f.DurationVar(&cfg.HoldDown, "hold-down", cfg.HoldDown, "a node that came back stays down this long (flap damping)")
	f.IntVar(&cfg.MaxRecvBytes, "max-recv-bytes", cfg.MaxRecvBytes, "largest gRPC request accepted, in bytes")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long shutdown waits for RPCs before cutting them")
	f.IntVar(&cfg.MoveParallelism, "move-parallelism", cfg.MoveParallelism, "most moves of a plan in flight at once (a move that ends makes room for the next); at every value a donor copies at most one slot holding data at a time, while near-empty slots (256 KiB or less) share the window; 1 moves strictly one slot at a time. The throttle stays per donor")
	f.DurationVar(&cfg.MoveRetryFor, "move-retry-for", cfg.MoveRetryFor, "how long a move whose store or etcd is away is retried, from its recorded phase with backoff, before the plan pauses (an etcd leader election or a store restart is routine)")
	f.DurationVar(&cfg.BalancerTick, "balancer-tick", cfg.BalancerTick, "how often the automatic balancer decides on the mover's leader (its policy: slotctl auto; off by default)")
	f.Var(&cfg.BalanceBy, "balance-by", "what a plan balances unless it says: slots, bytes, ops or auto (bytes and ops together; slot counts until a node reports its load)")
	flagenv.Annotate(f, envPrefix)
	return cmd
}

// serve runs slotd until ctx ends or a part fails.
func serve(ctx context.Context, cfg server.Config, logLevel string, stderr io.Writer) error {
	lg, err := newLogger(stderr, logLevel)
	if err != nil {
		return err
	}
	cfg.Logger = lg
	cfg.ServingLogAttrs = []any{"gogc", gcpercent.Apply()}
	s, err := server.New(ctx, cfg)
	if err != nil {
		if errors.Is(err, server.ErrInvalidConfig) {
			return usageError{err}
		}
		return err
	}
	defer s.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	if ts := s.TLS(); ts != nil {
		wg.Add(1)
		go func() { defer wg.Done(); reloadOnHUP(runCtx, ts, lg) }()
	}
	err = s.Run(runCtx)
	stop()
	wg.Wait()
	return err
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
