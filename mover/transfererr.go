package mover

// How a transfer's errors are told apart (retryable or not, gone), and the abort of a move.

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// classify wraps a store error, turning the codes that mean "the capture
// is gone" into ErrCaptureLost.
func classify(op string, err error) error {
	switch status.Code(err) {
	case codes.OutOfRange:
		return fmt.Errorf("%s: %w: %v", op, ErrCaptureLost, err)
	case codes.DataLoss:
		return fmt.Errorf("%s: %w: %v", op, ErrStoreLied, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Retryable reports whether a failed transfer may succeed if run again from
// the journal's phase: the failure was the network, a node or etcd being
// away.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, ErrStoreLied) || errors.Is(err, ErrCaptureLost) {
		return false
	}
	// etcd away (a leader election, a member lost) or a lost race: the
	// journal's write may be tried again.
	if errors.Is(err, directory.ErrUnavailable) || errors.Is(err, directory.ErrConflict) {
		return true
	}
	switch status.Code(errors.Unwrap(err)) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		switch se.GRPCStatus().Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
			return true
		}
	}
	return false
}

// Abort undoes a move that did not commit: the source is unfenced and stops
// capturing, and the target drops its partial copy. The source must be
// reachable: a fenced source that cannot be unfenced would refuse writes
// forever, so the caller retries Abort until it succeeds before it records
// the abort in the directory. The target's drop is best effort.
func Abort(ctx context.Context, slot slots.Slot, moveID string, source, target slotdv1.StoreClient) (targetErr error, err error) {
	s := uint32(slot.Int())
	if _, err := source.Unfence(ctx, &slotdv1.UnfenceRequest{Slot: s, MoveId: moveID}); err != nil {
		return nil, fmt.Errorf("unfence source: %w", err)
	}
	if _, err := source.EndCapture(ctx, &slotdv1.EndCaptureRequest{Slot: s, MoveId: moveID}); err != nil && status.Code(err) != codes.NotFound && status.Code(err) != codes.FailedPrecondition {
		return nil, fmt.Errorf("end capture on source: %w", err)
	}
	if _, err := target.DropSlot(ctx, &slotdv1.DropSlotRequest{Slot: s, MoveId: moveID}); err != nil {
		return fmt.Errorf("drop partial copy on target: %w", err), nil
	}
	return nil, nil
}

// isGone reports a store answer meaning the thing to clean up is not there.
func isGone(err error) bool {
	c := status.Code(err)
	return err != nil && (c == codes.NotFound || c == codes.FailedPrecondition)
}
