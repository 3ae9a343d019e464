package main

import (
	"context"
	"fmt"
	"log/slog"

	"go.uber.org/zap"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/migrations"
)

// applyMigrations brings the directory's etcd schema up to the newest this
// binary knows (under an etcd lock, so replicas starting together apply each
// step once). A newer schema in etcd is directory.ErrSchemaTooNew: slotd
// exits with exitSchema rather than risk misreading it.
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

// nopZap silences the etcd client's own logging; slotd logs what matters.
func nopZap() *zap.Logger { return zap.NewNop() }
