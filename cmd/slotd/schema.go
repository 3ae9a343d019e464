package main

import (
	"context"
	"fmt"
	"log/slog"

	"go.uber.org/zap"

	"github.com/slotd/slotd/directory"
)

// applyMigrations brings the directory's etcd schema up to the version this
// binary knows, under the directory's lock so that replicas starting
// together run it once, and refuses a newer schema (ErrSchemaTooNew).
//
// TODO(migrations): call migrations.Apply here once package migrations is
// committed; until then schema 1 (the only one) is created directly.
func applyMigrations(ctx context.Context, d *directory.Directory, lg *slog.Logger) error {
	return d.WithLock(ctx, "migrations", func(ctx context.Context) error {
		cur, err := d.Schema(ctx)
		if err != nil {
			return fmt.Errorf("read the directory schema: %w", err)
		}
		switch {
		case cur > directory.SchemaVersion:
			return fmt.Errorf("%w: etcd holds directory schema %d, this slotd supports up to %d; upgrade slotd", directory.ErrSchemaTooNew, cur, directory.SchemaVersion)
		case cur == directory.SchemaVersion:
			return nil
		}
		if err := d.InitLayout(ctx); err != nil {
			return err
		}
		if err := d.SetSchema(ctx, cur, directory.SchemaVersion); err != nil {
			return err
		}
		lg.Info("directory schema migrated", "from", cur, "to", directory.SchemaVersion)
		return nil
	})
}

// nopZap silences the etcd client's own logging; slotd logs what matters.
func nopZap() *zap.Logger { return zap.NewNop() }
