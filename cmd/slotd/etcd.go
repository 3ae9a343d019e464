package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/internal/flagenv"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/server/embedetcd"
	"github.com/slotd/slotd/tlsconf"
)

// etcdOptions are the flags of `slotd etcd`.
type etcdOptions struct {
	name, dataDir, clientURL, peerURL, initialCluster, token, logLevel string
	tlsCert, tlsKey, tlsCA                                             string
}

// newEtcdCmd runs one member of a multi-member etcd cluster, for the
// end-to-end tests' three-member cluster (and anyone who wants etcd without
// installing it).
func newEtcdCmd(stderr io.Writer) *cobra.Command {
	var o etcdOptions
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "run one member of an etcd cluster (for slotd --etcd-endpoints)",
		Long: `slotd etcd runs one etcd member until SIGTERM or SIGINT. Start every member
with the same --initial-cluster, for example:

  slotd etcd --name e1 --data-dir d1 --client-url 127.0.0.1:2379 --peer-url 127.0.0.1:2380 \
    --initial-cluster e1=http://127.0.0.1:2380,e2=http://127.0.0.1:2382,e3=http://127.0.0.1:2384

With --tls-cert and --tls-key both listeners serve TLS (https:// URLs, in
--initial-cluster too) and members dial each other with that certificate;
--tls-ca then makes them require client certificates from that CA, on the
client listener (give slotd --etcd-tls-cert, --etcd-tls-key and
--etcd-tls-ca) and between peers:

  slotd etcd --name e1 --data-dir d1 --tls-cert certs/server.pem --tls-key certs/server-key.pem \
    --tls-ca certs/ca.pem`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagenv.Bind(cmd.Flags(), envPrefix+"ETCD_"); err != nil {
				return usageError{err}
			}
			if o.name == "" || o.dataDir == "" {
				return usageError{errors.New("--name and --data-dir are required")}
			}
			if (o.tlsKey != "" || o.tlsCA != "") && o.tlsCert == "" || o.tlsCert != "" && o.tlsKey == "" {
				return usageError{errors.New("--tls-cert and --tls-key go together (a certificate with server and client usage, like certs/server.pem); --tls-ca needs them")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			lg, err := newLogger(stderr, o.logLevel)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var files tlsconf.Config
			scheme := "http"
			if o.tlsCert != "" {
				files = tlsconf.Config{CertFile: o.tlsCert, KeyFile: o.tlsKey, CAFile: o.tlsCA, Logger: lg}
				scheme = "https"
			}
			srv, err := embedetcd.Start(ctx, embedetcd.Config{
				Name: o.name, DataDir: o.dataDir,
				ClientURL: server.EtcdURL(o.clientURL, scheme), PeerURL: server.EtcdURL(o.peerURL, scheme),
				ClientTLS: files, PeerTLS: files,
				InitialCluster: o.initialCluster, ClusterToken: o.token, Logger: lg,
			})
			if err != nil {
				return err
			}
			defer srv.Close()
			lg.Info("etcd member serving", "name", o.name, "client_url", srv.Endpoints()[0])
			select {
			case <-ctx.Done():
				lg.Info("etcd member stopping", "name", o.name)
				return nil
			case err := <-srv.Err():
				return fmt.Errorf("etcd member %s: %w", o.name, err)
			}
		},
	}
	silence(cmd)
	f := cmd.Flags()
	f.StringVar(&o.name, "name", "", "member name, unique in the cluster")
	f.StringVar(&o.dataDir, "data-dir", "", "the member's data directory")
	f.StringVar(&o.clientURL, "client-url", "127.0.0.1:2379", "client URL (host:port or http://host:port)")
	f.StringVar(&o.peerURL, "peer-url", "127.0.0.1:2380", "peer URL (host:port or http://host:port)")
	f.StringVar(&o.initialCluster, "initial-cluster", "", "name=peerURL,... of every member; default: this member alone")
	f.StringVar(&o.token, "cluster-token", "slotd", "initial cluster token, the same on every member")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.tlsCert, "tls-cert", "", "certificate (PEM, server and client usage) of both listeners; enables TLS (https:// URLs)")
	f.StringVar(&o.tlsKey, "tls-key", "", "private key (PEM) for --tls-cert")
	f.StringVar(&o.tlsCA, "tls-ca", "", "CA (PEM) whose client certificates the member requires, from clients and peers")
	flagenv.Annotate(f, envPrefix+"ETCD_")
	return cmd
}
