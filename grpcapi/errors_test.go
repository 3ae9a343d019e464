package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover"
)

func TestToStatus(t *testing.T) {
	etcdErr := status.Error(codes.InvalidArgument, "etcdserver: too many operations in txn request")
	tests := []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("drain: %w: node id is empty", directory.ErrInvalid), codes.InvalidArgument},
		{fmt.Errorf("plan: %w: bad", mover.ErrInvalid), codes.InvalidArgument},
		{fmt.Errorf("%w: no plan", mover.ErrNotFound), codes.NotFound},
		{fmt.Errorf("%w at version 3", directory.ErrAlreadyBootstrapped), codes.AlreadyExists},
		{fmt.Errorf("apply: %w: stale", mover.ErrPrecondition), codes.FailedPrecondition},
		{fmt.Errorf("snapshot: %w", directory.ErrNotBootstrapped), codes.FailedPrecondition},
		{fmt.Errorf("move: %w", directory.ErrConflict), codes.Aborted},
		// etcd's own status inside does not decide the code.
		{fmt.Errorf("%w: write: %w", directory.ErrUnavailable, etcdErr), codes.Unavailable},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{invalid("lookup: the key is empty"), codes.InvalidArgument},
		{errors.New("something else\nentirely"), codes.Internal},
	}
	for _, tc := range tests {
		st, _ := status.FromError(toStatus(tc.err))
		if st.Code() != tc.code {
			t.Errorf("%v: code %v, want %v", tc.err, st.Code(), tc.code)
		}
		want := tc.err.Error()
		if s, ok := status.FromError(tc.err); ok && tc.code == s.Code() {
			want = s.Message()
		}
		if st.Code() != codes.Internal && st.Message() != want {
			t.Errorf("message %q, want %q", st.Message(), want)
		}
	}
	if st, _ := status.FromError(toStatus(errors.New("a\nb"))); st.Message() != "a b" {
		t.Errorf("multi-line message kept as %q", st.Message())
	}
	if toStatus(nil) != nil {
		t.Error("nil error became a status")
	}
}
