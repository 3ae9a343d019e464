package main

import (
	"slices"
	"strings"
	"testing"
)

// logOf runs slotctl history with args and returns "category:action" of
// each entry, in the order printed, and the entries.
func logOf(t *testing.T, s *testSlotd, args ...string) ([]string, []historyEntryJSON) {
	t.Helper()
	var h historyJSON
	decode(t, s.ok(t, append([]string{"history", "-o", "json", "--limit", "100"}, args...)...), &h)
	out := make([]string, len(h.Entries))
	for i, e := range h.Entries {
		out[i] = e.Category + ":" + e.Action
	}
	return out, h.Entries
}

// TestAuditHistory: every operator action is in the audit log with who and
// --reason, newest first, by kind; pause, resume and cancel carry the
// operator. On the old code history recorded none of apply, pause, resume,
// cancel, rollback or throttle (and had no --kind).
func TestAuditHistory(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	s.ok(t, "nodes", "drain", "n2", "--reason", "disk failing")
	s.ok(t, "throttle", "8MiB/s", "--reason", "business hours")
	var p struct{ ID string }
	decode(t, s.ok(t, "plan", "--max-moves", "3", "-o", "json"), &p)
	s.ok(t, "apply", p.ID, "--reason", "empty n2")
	s.ok(t, "pause", "--reason", "peak traffic")
	s.ok(t, "resume")
	s.ok(t, "cancel", "--reason", "wrong node")
	s.ok(t, "rollback", p.ID, "--reason", "undo")

	got, entries := logOf(t, s, "--kind", "plan")
	want := []string{"plan:rollback", "plan:cancel", "plan:resume", "plan:pause", "plan:apply"}
	if !slices.Equal(got, want) {
		t.Fatalf("history --kind plan = %v, want %v", got, want)
	}
	reasons := []string{"undo", "wrong node", "", "peak traffic", "empty n2"}
	for i, e := range entries {
		if e.Operator != "tester" || e.Reason != reasons[i] || e.PlanID != p.ID || e.Time == "" {
			t.Fatalf("entry %d (%s) = %+v; want operator tester, reason %q, plan %s", i, got[i], e, reasons[i], p.ID)
		}
	}
	rev, _ := logOf(t, s, "--kind", "plan", "--reverse")
	slices.Reverse(rev)
	if !slices.Equal(rev, want) {
		t.Fatalf("history --kind plan --reverse = %v, want %v reversed", rev, want)
	}
	got, entries = logOf(t, s, "--kind", "node")
	// The drain, then the rollback lifting the plan's drain of nothing:
	// the plan drained no node, so the operator's drain stays.
	if !slices.Equal(got, []string{"node:node-drain"}) || entries[0].Reason != "disk failing" || entries[0].NodeID != "n2" {
		t.Fatalf("history --kind node = %v %+v", got, entries)
	}
	got, entries = logOf(t, s, "--kind", "cluster")
	if !slices.Equal(got, []string{"cluster:throttle", "cluster:bootstrap"}) || entries[0].Reason != "business hours" ||
		!strings.Contains(entries[0].Detail, "8388608 bytes/s") {
		t.Fatalf("history --kind cluster = %v %+v", got, entries)
	}
	all, _ := logOf(t, s)
	if len(all) != 8 || all[0] != "plan:rollback" || all[len(all)-1] != "cluster:bootstrap" {
		t.Fatalf("history = %v; want all 8 entries, newest first", all)
	}
	if moves, _ := logOf(t, s, "--kind", "move"); len(moves) != 0 {
		t.Fatalf("history --kind move = %v; no move ran", moves)
	}
	out := s.ok(t, "history", "--kind", "plan", "--limit", "2")
	if !strings.Contains(out, "rollback") || !strings.Contains(out, "cancel") || strings.Contains(out, "resume") {
		t.Fatalf("history table, 2 newest plan entries:\n%s", out)
	}
	oneLineErr(t, s.run(t, "", "history", "--kind", "moves"), exitUsage, "want move, plan, node or cluster")
}
