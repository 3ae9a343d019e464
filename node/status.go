package node

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/redirect"
	"github.com/slotd/slotd/slots"
)

// StatusError converts an error of this package into the gRPC status a store
// node returns: a redirect becomes FAILED_PRECONDITION with a slotd.v1.Redirect
// detail, a fence UNAVAILABLE with slotd.v1.Fenced and RetryInfo details (see
// api/redirect), and the sentinels map as listed in store.proto. A store's
// own gRPC handlers pass every error from Write and CheckRead through it.
func StatusError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var re *RedirectError
	if errors.As(err, &re) {
		kind := redirect.Moved
		if re.Kind == Ask {
			kind = redirect.Ask
		}
		return redirect.Redirect{Kind: kind, Slot: re.Slot, Owner: re.Owner, Addr: re.Addr, Version: re.Version}.Err()
	}
	var fe *FencedError
	if errors.As(err, &fe) {
		return redirect.Fenced{Slot: fe.Slot, Version: fe.Version, MoveID: fe.MoveID, RetryAfter: fe.RetryAfter}.Err()
	}
	return status.Error(codeOf(err), err.Error())
}

func codeOf(err error) codes.Code {
	switch {
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, ErrNoMap), errors.Is(err, ErrMapBehind), errors.Is(err, ErrClosed),
		errors.Is(err, ErrDropping), errors.Is(err, ErrSelfFenced):
		return codes.Unavailable
	case errors.Is(err, ErrCaptureLost):
		return codes.OutOfRange
	case errors.Is(err, ErrMoveMismatch), errors.Is(err, ErrImportOrder), errors.Is(err, ErrOwned):
		return codes.FailedPrecondition
	case errors.Is(err, ErrWrongSlot), errors.Is(err, slots.ErrOutOfRange), errors.Is(err, errBadRequest):
		return codes.InvalidArgument
	}
	return codes.Internal
}

var errBadRequest = errors.New("node: bad request")
