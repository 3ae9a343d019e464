package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/slotd/slotd/api/slotdv1"
)

// TestAutoCommands drives `slotctl auto` against an in-process slotd: the
// default policy is off, every change is read back, bad values exit 2 (or 1
// from the server) and change nothing.
func TestAutoCommands(t *testing.T) {
	s := startSlotd(t, false)
	var a autoJSON
	decode(t, s.ok(t, "auto", "status", "-o", "json"), &a)
	if a.Policy.Enabled || a.Policy.Frozen || a.Policy.Tolerance != 0.1 || a.Policy.Window != "10m0s" ||
		a.Policy.Interval != "5m0s" || a.Policy.BalanceBy != "auto" || a.State.State != "off" {
		t.Fatalf("default policy: %+v", a)
	}

	decode(t, s.ok(t, "auto", "on", "--reason", "scale-out week", "-o", "json"), &a)
	if !a.Policy.Enabled || a.Policy.UpdatedBy != "tester" || a.Policy.Reason != "scale-out week" || a.State.State != "starting" {
		t.Fatalf("after on: %+v", a)
	}
	decode(t, s.ok(t, "auto", "set", "tolerance=5%", "window=30s", "interval=1m", "budget-moves=10",
		"budget-bytes=1GiB", "balance-by=bytes", "-o", "json"), &a)
	p := a.Policy
	if p.Tolerance != 0.05 || p.Window != "30s" || p.Interval != "1m0s" || p.BudgetMoves != 10 || p.BudgetBytes != 1<<30 || p.BalanceBy != "bytes" || !p.Enabled {
		t.Fatalf("after set: %+v", p)
	}
	decode(t, s.ok(t, "auto", "freeze", "--reason", "incident", "-o", "json"), &a)
	if !a.Policy.Frozen || !a.Policy.Enabled || a.State.State != "frozen" || a.Policy.Reason != "incident" {
		t.Fatalf("after freeze: %+v", a)
	}
	out := s.ok(t, "auto", "status")
	for _, want := range []string{"balancer", "on", "frozen", "tolerance", "5%", "window", "30s", "budget", "10 moves, 1.0 GiB per hour", "balance by", "bytes", "incident"} {
		if !strings.Contains(out, want) {
			t.Errorf("auto status table lacks %q:\n%s", want, out)
		}
	}
	decode(t, s.ok(t, "auto", "unfreeze", "-o", "json"), &a)
	if a.Policy.Frozen {
		t.Fatalf("after unfreeze: %+v", a)
	}
	decode(t, s.ok(t, "auto", "off", "-o", "json"), &a)
	if a.Policy.Enabled || a.State.State != "off" {
		t.Fatalf("after off: %+v", a)
	}

	for _, args := range [][]string{
		{"auto"}, {"auto", "set"}, {"auto", "set", "tolerance"}, {"auto", "set", "tolerance=0"}, {"auto", "set", "tolerance=150%"},
		{"auto", "set", "window=soon"}, {"auto", "set", "budget-moves=-1"}, {"auto", "set", "keys=1"}, {"auto", "on", "extra"},
	} {
		if r := s.run(t, "", args...); r.code != exitUsage {
			t.Errorf("slotctl %s: exit %d (stderr %q), want %d", strings.Join(args, " "), r.code, r.stderr, exitUsage)
		}
	}
	// The server refuses what only it knows is wrong.
	oneLineErr(t, s.run(t, "", "auto", "set", "balance-by=keys"), exitFailure, "balance-by")
	decode(t, s.ok(t, "auto", "status", "-o", "json"), &a)
	if a.Policy.BalanceBy != "bytes" || a.Policy.Tolerance != 0.05 {
		t.Fatalf("refused changes changed the policy: %+v", a.Policy)
	}
}

// TestNextCheck: when the balancer may plan again, from what its status
// says: the later of its backoff's end and its interval after its last
// automatic plan, while they run.
func TestNextCheck(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 1, 0, 0, time.UTC)
	at := func(m, s int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2026, 1, 2, 12, m, s, 0, time.UTC))
	}
	pol := func(enabled, frozen bool) *slotdv1.AutoPolicy {
		return &slotdv1.AutoPolicy{Enabled: enabled, Frozen: frozen, Interval: durationpb.New(5 * time.Minute)}
	}
	backoff := func(until *timestamppb.Timestamp, d time.Duration) *slotdv1.AutoState {
		return &slotdv1.AutoState{LastPlanAt: at(0, 3), BackoffUntil: until, Backoff: durationpb.New(d)}
	}
	cases := []struct {
		name string
		r    *slotdv1.AutoStatusResponse
		want string
	}{
		{"off", &slotdv1.AutoStatusResponse{Policy: pol(false, false), State: &slotdv1.AutoState{LastPlanAt: at(0, 3)}}, ""},
		{"frozen", &slotdv1.AutoStatusResponse{Policy: pol(true, true), State: &slotdv1.AutoState{LastPlanAt: at(0, 3)}}, ""},
		{"never planned", &slotdv1.AutoStatusResponse{Policy: pol(true, false), State: &slotdv1.AutoState{}}, ""},
		{"the interval runs", &slotdv1.AutoStatusResponse{Policy: pol(true, false), State: &slotdv1.AutoState{LastPlanAt: at(0, 3)}}, "2026-01-02T12:05:03Z"},
		{"the interval ran", &slotdv1.AutoStatusResponse{Policy: pol(true, false), State: &slotdv1.AutoState{LastPlanAt: timestamppb.New(now.Add(-5 * time.Minute))}}, ""},
		{"a backoff past the interval", &slotdv1.AutoStatusResponse{Policy: pol(true, false), State: backoff(at(10, 30), 9*time.Minute)}, "2026-01-02T12:10:30Z"},
		{"a backoff over (by the server's clock)", &slotdv1.AutoStatusResponse{Policy: pol(true, false), State: backoff(at(0, 30), 0)}, "2026-01-02T12:05:03Z"},
	}
	for _, tc := range cases {
		if got := nextCheck(tc.r, now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
