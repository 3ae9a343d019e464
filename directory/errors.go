package directory

import (
	"context"
	"errors"
	"fmt"
)

// Errors returned by the directory, always wrapped with context; test them
// with errors.Is.
var (
	// ErrConflict: another writer changed the directory between this
	// call's read and its write, and the call did not (or could no longer)
	// retry. Re-read and decide again.
	ErrConflict = errors.New("directory: conflict")
	// ErrNotFound: the node or move named does not exist.
	ErrNotFound = errors.New("directory: not found")
	// ErrInvalid: the input is malformed (slot out of range, empty id,
	// weight <= 0, ...). Retrying the same call cannot succeed.
	ErrInvalid = errors.New("directory: invalid input")
	// ErrPrecondition: the input is well formed but the directory's state
	// does not allow it (slot not stable, owner mismatch, target draining
	// or down, node still owns slots, ...).
	ErrPrecondition = errors.New("directory: precondition failed")
	// ErrPlanNotRunning: a move of a plan whose run key is gone (paused,
	// cancelled or finished) may not begin. It is an ErrPrecondition.
	ErrPlanNotRunning = fmt.Errorf("%w: plan not running", ErrPrecondition)
	// ErrNotBootstrapped: the slot table has not been created yet; run
	// Bootstrap first.
	ErrNotBootstrapped = errors.New("directory: not bootstrapped")
	// ErrAlreadyBootstrapped: Bootstrap was called on a directory that
	// already has a slot table.
	ErrAlreadyBootstrapped = errors.New("directory: already bootstrapped")
	// ErrSchemaTooNew: etcd holds a schema newer than this binary knows;
	// upgrade the binary.
	ErrSchemaTooNew = errors.New("directory: schema too new")
	// ErrNoSchema: etcd holds no schema version; run migrations.Apply.
	ErrNoSchema = errors.New("directory: no schema")
	// ErrUnavailable: etcd did not answer in time or failed; the call may
	// be retried.
	ErrUnavailable = errors.New("directory: etcd unavailable")
)

// fromEtcd translates an error from the etcd client into the directory's
// errors. It is the only place that does, so callers never see clientv3
// or gRPC errors. Context errors of the caller's own ctx pass through.
func fromEtcd(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("directory: %s: %w", op, ctx.Err())
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}
