package grpcapi

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/load"
	"github.com/slotd/slotd/mover"
)

// ErrInvalidConfig is returned for a Config that cannot work.
var ErrInvalidConfig = errors.New("service: invalid config")

// codeOf maps the errors of directory and mover onto gRPC codes. It is the
// one place that does, so every RPC answers the same error the same way.
var codeOf = []struct {
	err  error
	code codes.Code
}{
	{directory.ErrInvalid, codes.InvalidArgument},
	{mover.ErrInvalid, codes.InvalidArgument},
	{mover.ErrBadPlan, codes.InvalidArgument},
	{mover.ErrPlanFile, codes.InvalidArgument},
	{directory.ErrNotFound, codes.NotFound},
	{directory.ErrLeaseExpired, codes.NotFound},
	{mover.ErrNotFound, codes.NotFound},
	{directory.ErrAlreadyBootstrapped, codes.AlreadyExists},
	{directory.ErrPrecondition, codes.FailedPrecondition},
	{mover.ErrPrecondition, codes.FailedPrecondition},
	{directory.ErrNotBootstrapped, codes.FailedPrecondition},
	{directory.ErrNoSchema, codes.FailedPrecondition},
	{directory.ErrSchemaTooNew, codes.FailedPrecondition},
	{directory.ErrConflict, codes.Aborted},
	{directory.ErrUnavailable, codes.Unavailable},
	{ErrClosed, codes.Unavailable},
	{auth.ErrNotThisNode, codes.PermissionDenied},
	{load.ErrInvalid, codes.InvalidArgument},
	{load.ErrUnknownNode, codes.NotFound},
	{load.ErrBehind, codes.Unavailable},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{context.Canceled, codes.Canceled},
}

// toStatus turns err into a gRPC status error with a one-line message. The
// package sentinels decide first: a directory error may wrap an etcd gRPC
// status, whose code speaks of etcd's request, not of this one. A status
// error made here passes through; anything else is Internal.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	for _, c := range codeOf {
		if errors.Is(err, c.err) {
			return status.Error(c.code, msg)
		}
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, msg)
}

// invalid is an InvalidArgument for a malformed request.
func invalid(msg string) error { return status.Error(codes.InvalidArgument, msg) }
