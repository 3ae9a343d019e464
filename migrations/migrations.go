package migrations

import (
	"context"
	"errors"
	"fmt"

	"github.com/slotd/slotd/directory"
)

// ErrSchemaTooNew is directory.ErrSchemaTooNew: etcd holds a schema newer
// than this binary's newest migration.
var ErrSchemaTooNew = directory.ErrSchemaTooNew

// ErrBadRegistry: the migrations given to NewRegistry are not a sequence
// 1, 2, 3, ... with a name and an Up each.
var ErrBadRegistry = errors.New("migrations: bad registry")

// lockName is the directory lock Apply holds while it migrates.
const lockName = "migrations"

// Migration is one step of the schema: it turns schema Version-1 into
// Version.
type Migration struct {
	// Version is the schema the step produces.
	Version int
	// Name says what the step does, for logs.
	Name string
	// Up performs the step through the directory's primitives (the
	// directory alone knows the keys). It must be idempotent: a process that
	// dies after Up and before the schema version is written runs it again.
	Up func(ctx context.Context, d *directory.Directory) error
}

// Registry is an ordered list of migrations. It is immutable and safe for
// concurrent use.
type Registry struct {
	steps []Migration
}

// NewRegistry returns a registry of steps, which must have versions 1, 2,
// 3, ... in order, each with a name and an Up.
func NewRegistry(steps ...Migration) (*Registry, error) {
	if len(steps) == 0 {
		return nil, fmt.Errorf("%w: no migrations", ErrBadRegistry)
	}
	for i, s := range steps {
		switch {
		case s.Version != i+1:
			return nil, fmt.Errorf("%w: step %d has version %d, want %d (versions go 1, 2, 3, ... in order)", ErrBadRegistry, i, s.Version, i+1)
		case s.Name == "":
			return nil, fmt.Errorf("%w: migration %d has no name", ErrBadRegistry, s.Version)
		case s.Up == nil:
			return nil, fmt.Errorf("%w: migration %d (%s) has no Up", ErrBadRegistry, s.Version, s.Name)
		}
	}
	return &Registry{steps: append([]Migration(nil), steps...)}, nil
}

// Default returns the migrations of this binary; its Latest is
// directory.SchemaVersion.
func Default() *Registry {
	r, err := NewRegistry(defaultSteps()...)
	if err != nil {
		panic(err) // the built-in list is fixed; a test covers it
	}
	return r
}

func defaultSteps() []Migration {
	return []Migration{
		{
			Version: 1,
			Name:    "create layout",
			Up: func(ctx context.Context, d *directory.Directory) error {
				return d.InitLayout(ctx)
			},
		},
		{
			Version: 2,
			Name:    "plan results and run keys",
			Up:      upgradeResults,
		},
		{
			Version: 3,
			Name:    "replication policy",
			Up: func(ctx context.Context, d *directory.Directory) error {
				return d.InitReplication(ctx)
			},
		},
	}
}

// Latest returns the newest schema version the registry reaches.
func (r *Registry) Latest() int { return r.steps[len(r.steps)-1].Version }

// Check returns ErrSchemaTooNew when etcd holds a newer schema than r
// reaches, and the schema found.
func (r *Registry) Check(ctx context.Context, d *directory.Directory) (int, error) {
	cur, err := d.Schema(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	if cur > r.Latest() {
		return cur, fmt.Errorf("%w: found schema %d in etcd, this binary supports up to schema %d; upgrade this binary", ErrSchemaTooNew, cur, r.Latest())
	}
	return cur, nil
}

// Apply brings the schema up to r.Latest(), running the missing steps in
// order under an etcd lock, so that processes starting together apply each
// step once. It returns the versions it applied (none when up to date), or
// ErrSchemaTooNew, without changing anything, when etcd is ahead of r.
func (r *Registry) Apply(ctx context.Context, d *directory.Directory) ([]int, error) {
	cur, err := r.Check(ctx, d)
	if err != nil || cur == r.Latest() {
		return nil, err
	}
	var applied []int
	err = d.WithLock(ctx, lockName, func(ctx context.Context) error {
		// Another process may have migrated while we waited for the lock.
		cur, err := r.Check(ctx, d)
		if err != nil {
			return err
		}
		for _, s := range r.steps[cur:] {
			d.Logger().Info("applying schema migration", "version", s.Version, "name", s.Name)
			if err := s.Up(ctx, d); err != nil {
				return fmt.Errorf("migrations: %d (%s): %w", s.Version, s.Name, err)
			}
			if err := d.SetSchema(ctx, s.Version-1, s.Version); err != nil {
				return fmt.Errorf("migrations: %d (%s): %w", s.Version, s.Name, err)
			}
			applied = append(applied, s.Version)
		}
		return nil
	})
	return applied, err
}

// Apply runs Default().Apply: what slotd does at start.
func Apply(ctx context.Context, d *directory.Directory) ([]int, error) {
	return Default().Apply(ctx, d)
}
