package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// runTerminal runs slotctl against s as if stdin and stdout were a
// terminal, answering questions with stdin.
func (s *testSlotd) runTerminal(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	g := &globals{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb,
		tty: func() bool { return false }, interactive: func() bool { return true }, poll: 20 * time.Millisecond}
	code := runWith(g, append([]string{"--endpoints", s.addr, "--operator", "tester"}, args...))
	return result{out.String(), errb.String(), code}
}

// TestRollbackConfirmation: rollback asks on a terminal (--yes skips it, a
// "no" changes nothing), and rebalance with no terminal and no --yes exits
// 2 before dialing. On the old code rollback never asked (the "n" below
// rolled the plan back) and rebalance read stdin off a terminal.
func TestRollbackConfirmation(t *testing.T) {
	t.Run("rebalance without a terminal", func(t *testing.T) {
		closed := &testSlotd{addr: "127.0.0.1:1"} // a call would exit 1
		oneLineErr(t, closed.run(t, "y\n", "rebalance"), exitUsage, "pass --yes")
	})
	s := startSlotd(t, false)
	s.demo(t)
	var p struct{ ID string }
	decode(t, s.ok(t, "plan", "--drain", "n1", "--max-moves", "2", "-o", "json"), &p)
	s.ok(t, "apply", p.ID)
	s.ok(t, "cancel", p.ID) // no mover: nothing committed, the plan ended
	state := func() string {
		var got struct{ State string }
		decode(t, s.ok(t, "plans", "show", p.ID, "-o", "json"), &got)
		return got.State
	}
	t.Run("no", func(t *testing.T) {
		r := s.runTerminal(t, "n\n", "rollback", p.ID)
		oneLineErr(t, r, exitFailure, "not rolled back; nothing changed")
		if !strings.Contains(r.stdout, "roll back plan "+p.ID) || !strings.Contains(r.stdout, "[y/N]") {
			t.Fatalf("rollback asked nothing: %q", r.stdout)
		}
		if st := state(); st != "PLAN_STATE_CANCELLED" {
			t.Fatalf("plan %s is %s after a declined rollback, want cancelled", p.ID, st)
		}
	})
	t.Run("yes skips the question", func(t *testing.T) {
		r := s.runTerminal(t, "", "rollback", p.ID, "--yes")
		if r.code != exitOK || strings.Contains(r.stdout, "[y/N]") {
			t.Fatalf("rollback --yes: exit %d, stderr %q, stdout %q", r.code, r.stderr, r.stdout)
		}
		if st := state(); st != "PLAN_STATE_ROLLED_BACK" {
			t.Fatalf("plan %s is %s after rollback --yes, want rolled_back", p.ID, st)
		}
	})
}
