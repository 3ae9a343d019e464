package server

// The directory's etcd and its schema, and store dialing.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/migrations"
	"github.com/slotd/slotd/server/embedetcd"
	"github.com/slotd/slotd/tlsconf"
)

// applyMigrations brings the directory's etcd schema up to the newest this
// binary knows (under an etcd lock, so replicas starting together apply each
// step once). A newer schema in etcd is directory.ErrSchemaTooNew: slotd
// exits with its schema code rather than risk misreading it.
func applyMigrations(ctx context.Context, d *directory.Directory, lg *slog.Logger) error {
	applied, err := migrations.Apply(ctx, d)
	if err != nil {
		return fmt.Errorf("schema migrations: %w", err)
	}
	if len(applied) > 0 {
		lg.Info("directory schema migrated", "applied", applied)
	}
	return nil
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
func storeDialOptions(cfg Config, lg *slog.Logger) ([]grpc.DialOption, error) {
	if cfg.TLSCA == "" && cfg.StoreTLSCert == "" {
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	tc, err := tlsconf.NewClient(tlsconf.Config{CertFile: cfg.StoreTLSCert, KeyFile: cfg.StoreTLSKey, CAFile: cfg.TLSCA, Logger: lg})
	if err != nil {
		return nil, fmt.Errorf("store TLS: %w", err)
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(tc.Credentials())}, nil
}

// EtcdURL turns "host:port" into "scheme://host:port"; a URL passes as is.
func EtcdURL(s, scheme string) string {
	if strings.Contains(s, "://") {
		return s
	}
	return scheme + "://" + s
}

// openEtcd starts the embedded etcd member (unless cfg.EtcdEndpoints names
// a cluster) and returns a client of it, with the endpoints it dials. On
// error nothing is left running.
func openEtcd(ctx context.Context, cfg Config, lg *slog.Logger) (member *embedetcd.Server, endpoints []string, cli *clientv3.Client, err error) {
	endpoints = cfg.EtcdEndpoints
	if len(endpoints) == 0 {
		// With EtcdTLSCert the member serves TLS on both listeners with
		// those files, and slotd dials it with the same ones (below).
		var etcdTLS tlsconf.Config
		scheme := "http"
		if cfg.EtcdTLSCert != "" {
			etcdTLS = tlsconf.Config{CertFile: cfg.EtcdTLSCert, KeyFile: cfg.EtcdTLSKey, CAFile: cfg.EtcdTLSCA, Logger: lg}
			scheme = "https"
		}
		member, err = embedetcd.Start(ctx, embedetcd.Config{
			DataDir: cfg.DataDir, ClientURL: EtcdURL(cfg.EtcdClientURL, scheme), PeerURL: EtcdURL(cfg.EtcdPeerURL, scheme),
			ClientTLS: etcdTLS, PeerTLS: etcdTLS, Logger: lg,
		})
		if err != nil {
			return nil, nil, nil, err
		}
		endpoints = member.Endpoints()
	}
	fail := func(err error) (*embedetcd.Server, []string, *clientv3.Client, error) {
		if member != nil {
			member.Close()
		}
		return nil, nil, nil, err
	}
	cc := clientv3.Config{Endpoints: endpoints, DialTimeout: cfg.RequestTimeout, Logger: zap.NewNop()}
	if cfg.EtcdTLSCert != "" || cfg.EtcdTLSKey != "" || cfg.EtcdTLSCA != "" {
		etc, err := tlsconf.NewClient(tlsconf.Config{CertFile: cfg.EtcdTLSCert, KeyFile: cfg.EtcdTLSKey, CAFile: cfg.EtcdTLSCA, Logger: lg})
		if err != nil {
			return fail(fmt.Errorf("etcd TLS: %w", err))
		}
		etc.ConfigureEtcd(&cc)
	}
	if cli, err = clientv3.New(cc); err != nil {
		return fail(fmt.Errorf("etcd client for %v: %w", endpoints, err))
	}
	return member, endpoints, cli, nil
}
