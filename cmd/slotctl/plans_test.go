package main

import (
	"strings"
	"testing"
)

// TestPlansListShow: every kept plan is listed, finished ones too, with its
// state, counts, who and why; show gives one with its moves. The old code
// had no command that listed a plan (`apply nosuch` pointed at status,
// which lists only the active one).
func TestPlansListShow(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	var first, second struct{ ID string }
	decode(t, s.ok(t, "plan", "--drain", "n1", "--max-moves", "3", "--reason", "first try", "-o", "json"), &first)
	s.ok(t, "apply", first.ID)
	s.ok(t, "cancel", first.ID)
	decode(t, s.ok(t, "plan", "--drain", "n2", "--max-moves", "2", "-o", "json"), &second)

	var list struct {
		Plans []struct {
			ID       string
			State    string
			Operator string
			Reason   string
			Moves    []any
			Progress struct{ Moves, Done, Skipped, Aborted, Pending uint32 }
		}
	}
	decode(t, s.ok(t, "plans", "list", "-o", "json"), &list)
	if len(list.Plans) != 2 || list.Plans[0].ID != second.ID || list.Plans[1].ID != first.ID {
		t.Fatalf("plans list -o json: want %s then %s, got %+v", second.ID, first.ID, list.Plans)
	}
	if p := list.Plans[1]; p.State != "PLAN_STATE_CANCELLED" || p.Operator != "tester" || p.Reason != "first try" || p.Progress.Moves != 3 {
		t.Fatalf("the cancelled plan as listed: %+v", p)
	}
	out := s.ok(t, "plans", "list")
	for _, want := range []string{"PLAN", "STATE", "FAILED", "ESTIMATED", first.ID + "  cancelled", second.ID + "  proposed", "first try", "~0 B"} {
		if !strings.Contains(out, want) {
			t.Fatalf("plans list lacks %q:\n%s", want, out)
		}
	}
	out = s.ok(t, "plans", "show", first.ID)
	for _, want := range []string{"plan " + first.ID + " cancelled", "operator: tester; reason: first try", "SLOT", "OUTCOME"} {
		if !strings.Contains(out, want) {
			t.Fatalf("plans show lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n < 3+6 {
		t.Fatalf("plans show lists no moves:\n%s", out)
	}
	oneLineErr(t, s.run(t, "", "plans", "show", "p-nosuch"), exitFailure, `no plan "p-nosuch"`)
	oneLineErr(t, s.run(t, "", "plans"), exitUsage, "plans list|show")
}
