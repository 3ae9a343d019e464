package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/slotd/slotd/directory"
)

// Restore writes a directory backup (the document of slotctl backup) into
// the etcd cfg names, under cfg.EtcdPrefix: the embedded etcd in
// cfg.DataDir, started for the time of the restore, or cfg.EtcdEndpoints.
// No slotd may run on that prefix (directory.Restore refuses while one's
// election key is there). It returns the restored version, past the saved
// one by opts.VersionMargin.
func Restore(ctx context.Context, cfg Config, doc []byte, opts directory.RestoreOptions) (uint64, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	b, err := directory.ParseBackup(doc)
	if err != nil {
		return 0, err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	member, endpoints, cli, err := openEtcd(ctx, cfg, lg)
	if err != nil {
		return 0, err
	}
	// Shutdown order: the client, then the embedded member.
	defer func() {
		cli.Close()
		if member != nil {
			member.Close()
		}
	}()
	d, err := directory.New(directory.Config{Client: cli, Prefix: cfg.EtcdPrefix, Logger: lg, RequestTimeout: cfg.RequestTimeout})
	if err != nil {
		return 0, err
	}
	v, err := d.Restore(ctx, b, opts)
	if err != nil {
		return 0, fmt.Errorf("restore into %v under %q: %w", endpoints, d.Prefix(), err)
	}
	lg.Info("directory restored", "version", v, "saved_version", b.Version, "etcd", endpoints, "prefix", d.Prefix(), "cluster", b.ClusterID)
	return v, nil
}
