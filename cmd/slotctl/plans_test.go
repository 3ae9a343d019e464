package main

import (
	"strings"
	"testing"

	"github.com/slotd/slotd/api/slotdv1"
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

// TestPlanPreviewLoad: the preview shows each node's load ratios before ->
// after, nodes of unknown load, hot spots with their tag, and blocked slots.
func TestPlanPreviewLoad(t *testing.T) {
	p := &slotdv1.Plan{
		Id: "p-9-abc", BaseVersion: 9, BalanceBy: "auto", Tolerance: 0.1, Note: "balanced within 10%",
		UnknownNodes: []string{"n3"},
		HotSpots:     []*slotdv1.HotSpot{{Slot: 3330, NodeId: "n1", Dimension: "ops", Share: 1.8, Tag: "{cart7}"}},
		Blocked:      []*slotdv1.BlockedSlots{{NodeId: "n5", Slots: "100-199", Count: 100, Reason: "n5 is down"}},
		Nodes: []*slotdv1.NodeBalance{
			{NodeId: "n1", SlotsBefore: 10, SlotsAfter: 1, LoadKnown: true,
				LoadBefore: &slotdv1.NodeLoadView{BytesRatio: 1.34, OpsRatio: 2.38}, LoadAfter: &slotdv1.NodeLoadView{BytesRatio: 0.01, OpsRatio: 1.8}},
			{NodeId: "n3", SlotsBefore: 5, SlotsAfter: 5},
		},
		Moves: []*slotdv1.PlannedMove{{Slot: 7, From: "n1", To: "n2", Reason: "n1 keeps hot slot 3330 alone"}},
	}
	var b strings.Builder
	if err := printPlanPreview(&b, p, 0); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"balances auto within 10% of each node's share: balanced within 10%",
		"load unknown (no recent report; they neither give nor take): n3",
		"hot spot: slot 3330 on n1 carries 180% of its ops share alone, hash tag {cart7}",
		"blocked: 100 slots of n5 (100-199): n5 is down",
		"BYTES RATIO", "1.34 -> 0.01", "2.38 -> 1.80", "unknown",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("preview lacks %q:\n%s", want, b.String())
		}
	}
}

// TestPlanBalanceByFlags: with no load report, auto plans slot counts and
// says so, an explicit bytes plan is refused (exit 3, nothing stored), and
// bad --balance-by, --tolerance and --max-bytes are usage errors.
func TestPlanBalanceByFlags(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	s.ok(t, "nodes", "add", "n4=127.0.0.1:7504")
	out := s.ok(t, "plan", "--max-moves", "5")
	if !strings.Contains(out, "balances slots: no load report yet: balanced slot counts; stopped at the budget") {
		t.Fatalf("auto without reports:\n%s", out)
	}
	oneLineErr(t, s.run(t, "", "plan", "--balance-by", "bytes"), exitRefused, "needs load reports")
	for _, args := range [][]string{
		{"plan", "--balance-by", "keys"},
		{"plan", "--tolerance", "1.5"},
		{"rebalance", "--yes", "--max-bytes", "12 parsecs"},
	} {
		if r := s.run(t, "", args...); r.code != exitUsage {
			t.Errorf("slotctl %s: exit %d (stderr %q), want %d", strings.Join(args, " "), r.code, r.stderr, exitUsage)
		}
	}
	var p struct {
		Moves []struct{ Bytes string }
	}
	decode(t, s.ok(t, "plan", "--balance-by", "slots", "--max-moves", "3", "--max-bytes", "1MiB", "-o", "json"), &p)
	if len(p.Moves) != 3 {
		t.Fatalf("--max-moves 3: %d moves", len(p.Moves))
	}
}

// TestPlansShowCopied: a finished plan shows the bytes its transfers
// copied beside the planner's estimate (measured, from each move's result),
// in the list (no moves needed) and per move.
func TestPlansShowCopied(t *testing.T) {
	s := startSlotd(t, true)
	a, b := startKV(t, "n1", s.addr), startKV(t, "n2", s.addr)
	s.ok(t, "init", "--node", "n1="+a, "--node", "n2="+b, "--vnodes", "8")
	s.settle(t)
	fill(t, a, 20)
	fill(t, b, 20)
	var l []lookupJSON
	decode(t, s.ok(t, "lookup", "key:0", "-o", "json"), &l)
	to := map[string]string{"n1": "n2", "n2": "n1"}[l[0].Owner]
	if out := s.ok(t, "move", itoa(l[0].Slot), "--to", to, "--wait"); !strings.Contains(out, "1 moves (0 skipped), 1.0 KiB copied, ") {
		t.Fatalf("move --wait done line without measured bytes:\n%s", out)
	}
	var list struct {
		Plans []struct {
			ID       string
			Progress struct {
				Done        uint32 `json:"done"`
				BytesCopied string `json:"bytes_copied"`
			}
		}
	}
	decode(t, s.ok(t, "plans", "list", "-o", "json"), &list)
	if len(list.Plans) != 1 || list.Plans[0].Progress.BytesCopied == "0" || list.Plans[0].Progress.Done != 1 {
		t.Fatalf("plans list: %+v", list.Plans)
	}
	out := s.ok(t, "plans", "show", list.Plans[0].ID)
	if strings.Contains(out, "bytes: - copied") || !strings.Contains(out, "committed") {
		t.Fatalf("plans show:\n%s", out)
	}
}
