package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/flagenv"
	"github.com/slotd/slotd/server"
)

// newRestoreCmd is `slotd restore --from FILE`: offline, into a fresh etcd.
func newRestoreCmd(stdout, stderr io.Writer) *cobra.Command {
	cfg, logLevel := server.DefaultConfig(), "info"
	var from string
	var opts directory.RestoreOptions
	cmd := &cobra.Command{
		Use:   "restore --from FILE",
		Short: "Write a directory backup (slotctl backup) into a fresh etcd; no slotd may run on it",
		Long: `slotd restore writes the directory saved by 'slotctl backup FILE' into an etcd:
the embedded one in --data-dir (started for the restore) or --etcd-endpoints,
under --etcd-prefix. It refuses a prefix that holds any key unless --force
(which replaces them), and always while a slotd of that prefix runs.

The restored version is --version-margin past the saved one, so clients and
store nodes that saw later versions of the lost directory take the restored
map as newer; the cluster id is the saved one, so they accept it. Start slotd
on the same etcd afterwards.`,
		Example: `  slotctl backup dir.json
  slotd restore --from dir.json --data-dir /var/lib/slotd-new
  slotd restore --from dir.json --etcd-endpoints https://etcd-1:2379 --force`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagenv.Bind(cmd.Flags(), envPrefix); err != nil {
				return usageError{err}
			}
			if from == "" {
				return usageError{errors.New("--from FILE is required (a document written by slotctl backup)")}
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			lg, err := newLogger(stderr, logLevel)
			if err != nil {
				return err
			}
			cfg.Logger = lg
			doc, err := os.ReadFile(from)
			if err != nil {
				return fmt.Errorf("read the backup: %w", err)
			}
			v, err := server.Restore(cmd.Context(), cfg, doc, opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "restored %s at version %d\n", from, v)
			return nil
		},
	}
	silence(cmd)
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "the backup document (slotctl backup FILE)")
	f.BoolVar(&opts.Force, "force", false, "replace whatever the etcd prefix holds")
	f.Uint64Var(&opts.VersionMargin, "version-margin", directory.DefaultVersionMargin, "how far past the saved version the restored one is")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "the embedded etcd's data directory")
	f.StringSliceVar(&cfg.EtcdEndpoints, "etcd-endpoints", nil, "existing etcd cluster, comma-separated URLs; no embedded etcd then")
	f.StringVar(&cfg.EtcdPrefix, "etcd-prefix", cfg.EtcdPrefix, "key prefix of the cluster's directory in etcd")
	f.StringVar(&cfg.EtcdClientURL, "etcd-client-url", cfg.EtcdClientURL, "the embedded etcd's client URL")
	f.StringVar(&cfg.EtcdPeerURL, "etcd-peer-url", cfg.EtcdPeerURL, "the embedded etcd's peer URL")
	f.StringVar(&cfg.EtcdTLSCert, "etcd-tls-cert", "", "client certificate (PEM) for etcd (the embedded one serves TLS with it)")
	f.StringVar(&cfg.EtcdTLSKey, "etcd-tls-key", "", "private key (PEM) for --etcd-tls-cert")
	f.StringVar(&cfg.EtcdTLSCA, "etcd-tls-ca", "", "CA (PEM) that verifies the etcd servers")
	f.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "deadline of each etcd request")
	f.StringVar(&logLevel, "log-level", logLevel, "debug, info, warn or error")
	flagenv.Annotate(f, envPrefix)
	return cmd
}
