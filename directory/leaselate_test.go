package directory

import (
	"errors"
	"testing"
)

// TestLateRegistrationKeepsLease: a store whose registration timed out on
// its side tries again; when the first attempt reaches slotd after the
// second, it must not replace (and revoke) the lease the second got, or
// the store's heartbeats fail, it registers again, and the loop goes on.
// Another incarnation (the store restarted) or no registrant replaces the
// lease as before.
func TestLateRegistrationKeepsLease(t *testing.T) {
	_, d, _ := setup(t, 2, nil)
	ctx := testCtx(t)
	second, err := d.GrantLease(ctx, "n0", Registrant{Incarnation: "p1", Attempt: 2})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		by      Registrant
		wantErr error
	}{
		{"the same process's earlier attempt, arriving late", Registrant{Incarnation: "p1", Attempt: 1}, ErrConflict},
		{"a later attempt of the same process", Registrant{Incarnation: "p1", Attempt: 3}, nil},
		{"a restarted process", Registrant{Incarnation: "p2", Attempt: 1}, nil},
		{"no registrant", Registrant{}, nil},
	}
	holder := second
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.GrantLease(ctx, "n0", tc.by)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("GrantLease = %v, want %v", err, tc.wantErr)
			}
			if _, rerr := d.RenewLease(ctx, "n0", holder.ID); (tc.wantErr != nil) != (rerr == nil) {
				t.Fatalf("renewing the lease held before: %v (grant refused: %v)", rerr, tc.wantErr != nil)
			}
			if err == nil {
				holder = got
			}
		})
	}
}
