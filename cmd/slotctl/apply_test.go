package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPlanApplyWait runs plans for real: a slotd with a mover, slotkv store
// nodes, and slotctl planning, applying, waiting and rolling back.
func TestPlanApplyWait(t *testing.T) {
	s := startSlotd(t, true)
	a, b, c := startKV(t, "n1", s.addr), startKV(t, "n2", s.addr), startKV(t, "n3", s.addr)
	s.ok(t, "init", "--node", "n1="+a, "--node", "n2="+b, "--vnodes", "8")
	eventually(t, "a mover leader", func() bool {
		var st statusJSON
		decode(t, s.ok(t, "status", "-o", "json"), &st)
		return st.MoverLeader == "s1"
	})
	dir := t.TempDir()
	planFile := filepath.Join(dir, "plan.json")

	t.Run("plan file, apply --wait", func(t *testing.T) {
		// n3 registers first, as a store node does when it starts. (A plan
		// whose Apply registers the node races the executor's cached table:
		// see the report on mover.Executor.step.)
		s.ok(t, "nodes", "add", "n3="+c)
		eventually(t, "n3 in the served map", func() bool {
			return s.run(t, "", "map", "--node", "n3").code == exitOK
		})
		if err := os.WriteFile(planFile, []byte(s.ok(t, "plan", "--add", "n3="+c, "--max-moves", "20", "-o", "json")), 0o644); err != nil {
			t.Fatal(err)
		}
		out := s.ok(t, "apply", planFile, "--wait")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last := lines[len(lines)-1]
		if !strings.Contains(out, "applying") || !strings.Contains(last, "done: 20 moves") {
			t.Fatalf("apply --wait output:\n%s", out)
		}
		// Not a terminal: plain lines, no carriage returns or escapes.
		if strings.ContainsAny(out, "\r\x1b") || !strings.Contains(out, "20/20 slots") {
			t.Fatalf("apply --wait on a non-terminal:\n%q", out)
		}
		s.settle(t)
		var m mapJSON
		decode(t, s.ok(t, "map", "--node", "n3", "-o", "json"), &m)
		if m.Nodes[0].Slots != 20 {
			t.Fatalf("n3 owns %d slots after the plan, want 20", m.Nodes[0].Slots)
		}
	})
	t.Run("a plan applied twice is refused", func(t *testing.T) {
		oneLineErr(t, s.run(t, "", "apply", planFile), exitRefused, "exists already and is done")
	})
	t.Run("stale plan is refused", func(t *testing.T) {
		stale := filepath.Join(dir, "stale.json")
		if err := os.WriteFile(stale, []byte(s.ok(t, "plan", "--max-moves", "5", "-o", "json")), 0o644); err != nil {
			t.Fatal(err)
		}
		var p struct {
			Moves []struct {
				Slot uint32
				From string
			}
		}
		decode(t, readFile(t, stale), &p)
		// Someone moves the plan's first slot away from where the plan expects it.
		other := "n1"
		if p.Moves[0].From == "n1" {
			other = "n2"
		}
		s.ok(t, "move", itoa(p.Moves[0].Slot), "--to", other, "--wait")
		oneLineErr(t, s.run(t, "", "apply", stale, "--wait"), exitRefused, "plan is stale")
	})
	t.Run("rollback --last", func(t *testing.T) {
		out := s.ok(t, "rollback", "--last", "--wait")
		if !strings.Contains(out, "done: 1 moves") {
			t.Fatalf("rollback of the move:\n%s", out)
		}
	})
	t.Run("rebalance confirmed", func(t *testing.T) {
		r := s.runTerminal(t, "y\n", "rebalance", "--max-moves", "4")
		if r.code != exitOK || r.stderr != "" || !strings.Contains(r.stdout, "[y/N]") || !strings.Contains(r.stdout, "done: 4 moves") {
			t.Fatalf("rebalance: exit %d, stderr %q, stdout:\n%s", r.code, r.stderr, r.stdout)
		}
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
