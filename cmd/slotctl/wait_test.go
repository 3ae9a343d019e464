package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/slotd/slotd/api/slotdv1"
)

func planAt(state slotdv1.PlanState, done, moves uint32, bytesDone, total uint64) *slotdv1.Plan {
	return &slotdv1.Plan{Id: "p1", State: state, Progress: &slotdv1.PlanProgress{
		Moves: moves, Done: done, Pending: moves - done, Bytes: total, BytesDone: bytesDone}}
}

func TestProgressBar(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, true, "p1")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	applying := slotdv1.PlanState_PLAN_STATE_APPLYING
	p.update(planAt(applying, 0, 10, 0, 100<<20), t0)
	p.update(planAt(applying, 5, 10, 50<<20, 100<<20), t0.Add(10*time.Second))
	p.end()
	want := "\r\x1b[K[>                             ]   0%  0/10 slots  ~0 B/~100.0 MiB  ~0 B/s  ETA -  applying" +
		"\r\x1b[K[===============>              ]  50%  5/10 slots  ~50.0 MiB/~100.0 MiB  ~5.0 MiB/s  ETA 10s  applying\n"
	if out.String() != want {
		t.Fatalf("bar:\n%q\nwant\n%q", out.String(), want)
	}
}

// TestProgressLines: off a terminal, a line per 5% step, at most one a
// second, a line every 10s when nothing moves, and always the last state.
func TestProgressLines(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, false, "p1")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	applying, done := slotdv1.PlanState_PLAN_STATE_APPLYING, slotdv1.PlanState_PLAN_STATE_DONE
	steps := []struct {
		at     time.Duration
		done   uint32
		prints bool
	}{
		{0, 0, true},                        // first
		{300 * time.Millisecond, 10, false}, // a new step, but within a second
		{1200 * time.Millisecond, 10, true}, // the step, a second later
		{2500 * time.Millisecond, 12, false},
		{3 * time.Second, 12, false},         // same step (12% -> step 2)
		{13500 * time.Millisecond, 12, true}, // nothing moved for 10s: a line anyway
		{14 * time.Second, 100, true},        // done: always
	}
	for _, s := range steps {
		before := out.Len()
		st := applying
		if s.done == 100 {
			st = done
		}
		p.update(planAt(st, s.done, 100, 0, 0), t0.Add(s.at))
		if printed := out.Len() > before; printed != s.prints {
			t.Fatalf("at %s (%d done): printed %v, want %v; output so far:\n%s", s.at, s.done, printed, s.prints, out.String())
		}
	}
	last := strings.Split(strings.TrimSpace(out.String()), "\n")
	if got := last[len(last)-1]; got != "plan p1 done: 100%  100/100 slots  ~0 B/~0 B  ~0 B/s  ETA 0s" {
		t.Fatalf("last line %q", got)
	}
}

func TestFormatDuration(t *testing.T) {
	cases := map[time.Duration]string{
		0: "0s", 850 * time.Millisecond: "850ms", 12400 * time.Millisecond: "12s", 6*time.Minute + 20*time.Second: "6m20s",
		4 * time.Minute: "4m", 2*time.Hour + 3*time.Minute + 20*time.Second: "2h3m", 3 * time.Hour: "3h0m",
	}
	for in, want := range cases {
		if got := formatDuration(in); got != want {
			t.Errorf("formatDuration(%s) = %q, want %q", in, got, want)
		}
	}
}

// runningPlan is a plan of n empty-slot moves, the first done of them
// finished, the first move started at start, each move copying copied
// bytes (0: slotd reports none).
func runningPlan(n, done int, start time.Time, every time.Duration, copied uint64) *slotdv1.Plan {
	p := planAt(slotdv1.PlanState_PLAN_STATE_APPLYING, uint32(done), uint32(n), 0, 0)
	for i := range n {
		m := &slotdv1.PlannedMove{Slot: uint32(i), Phase: slotdv1.MovePhase_MOVE_PHASE_PENDING}
		if i <= done {
			m.StartedAt = timestamppb.New(start.Add(time.Duration(i) * every))
		}
		if i < done {
			m.Phase, m.FinishedAt, m.BytesCopied = slotdv1.MovePhase_MOVE_PHASE_COMMITTED, timestamppb.New(start.Add(time.Duration(i+1)*every)), copied
		}
		p.Moves = append(p.Moves, m)
	}
	return p
}

// TestProgressJoinedLate: a wait that starts when the plan has run 40 s
// (10 of 20 moves, 4 s each) shows the plan's own pace: about 40 s left.
// The old code timed the moves from when the wait began: "ETA -", then,
// one move 4 s later, 4s/11 per move: "ETA 3s" for 9 moves that take 36 s.
func TestProgressJoinedLate(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, false, "p1")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p.update(runningPlan(20, 10, t0, 4*time.Second, 0), t0.Add(40*time.Second))
	p.update(runningPlan(20, 11, t0, 4*time.Second, 0), t0.Add(44*time.Second))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "10/20 slots  ~0 B/~0 B  ~0 B/s  ETA 40s") ||
		!strings.HasSuffix(lines[1], "11/20 slots  ~0 B/~0 B  ~0 B/s  ETA 36s") {
		t.Fatalf("progress joined late:\n%s", out.String())
	}
}

// TestETAFromMeasuredPace: the byte rate shown is what the transfers
// copied over the plan's running time, and the time left is the larger of
// the moves left at the per-move time and the estimated bytes left at the
// pace so far: 2 of 4 moves in 10 s with 10 of 100 estimated MiB done
// leaves 90 MiB at 1 MiB/s, not 2 moves at 5 s.
func TestETAFromMeasuredPace(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	plan := runningPlan(4, 2, t0, 5*time.Second, 6<<20)
	plan.Progress.BytesDone, plan.Progress.Bytes = 10<<20, 100<<20
	pc := paceOf(plan, t0.Add(10*time.Second), t0.Add(10*time.Second))
	if pc.estimate || pc.copied != 12<<20 || pc.rate != float64(12<<20)/10 || pc.eta != 90*time.Second {
		t.Fatalf("pace = %+v; want 12 MiB copied, 1.2 MiB/s measured, ETA 90s", pc)
	}
	var out bytes.Buffer
	newProgress(&out, false, "p1").update(plan, t0.Add(10*time.Second))
	if !strings.Contains(out.String(), "12.0 MiB copied of ~100.0 MiB  1.2 MiB/s  ETA 1m30s") {
		t.Fatalf("line: %q", out.String())
	}
}
