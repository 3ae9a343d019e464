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
	// ErrNoZone: with rf above 1, every active node needs a zone; the
	// node (or nodes) named has none. It is an ErrPrecondition.
	ErrNoZone = fmt.Errorf("%w: node has no zone", ErrPrecondition)
	// ErrRFAboveZones: rf is above the number of zones that hold active
	// nodes. It is an ErrPrecondition.
	ErrRFAboveZones = fmt.Errorf("%w: rf above the zone count", ErrPrecondition)
	// ErrZoneConflict: the change would put two replicas of a slot in one
	// zone. It is an ErrPrecondition.
	ErrZoneConflict = fmt.Errorf("%w: two replicas in one zone", ErrPrecondition)
	// ErrBelowMinISR: the change would leave a slot with fewer in-sync
	// replicas than min_isr. It is an ErrPrecondition.
	ErrBelowMinISR = fmt.Errorf("%w: ISR below min_isr", ErrPrecondition)
	// ErrRemovePrimary: the change would remove a slot's primary from its
	// set; transfer the primary first. It is an ErrPrecondition.
	ErrRemovePrimary = fmt.Errorf("%w: removes the primary", ErrPrecondition)
	// ErrRFNeedsMoves: the rf asked for would add or remove replicas,
	// which is the mover's work, as a plan. It is an ErrPrecondition.
	ErrRFNeedsMoves = fmt.Errorf("%w: rf change needs replicas added or removed", ErrPrecondition)
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
