package mover

// How a transfer's errors are told apart: retryable or not, gone.

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/directory"
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

// retryable reports whether a failed transfer may succeed if run again from
// the journal's phase: the failure was the network, a node or etcd being
// away.
func retryable(err error) bool {
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

// isGone reports a store answer meaning the thing to clean up is not there.
func isGone(err error) bool {
	c := status.Code(err)
	return err != nil && (c == codes.NotFound || c == codes.FailedPrecondition)
}
