package main

import (
	"strings"
	"testing"
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
