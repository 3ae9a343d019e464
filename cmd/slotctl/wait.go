package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
)

// waitPlan follows plan id until it ends, drawing progress on w (a bar on
// a terminal, a line per 5% step or per 10s elsewhere, at most one a
// second; nothing when w is nil). It returns the plan's last state:
//
//   - done: nil (exit 0)
//   - failed, or paused by the mover because a move failed: the plan's
//     error (exit 1)
//   - cancelled or rolled back by someone else: refusedError (exit 3)
//   - Ctrl-C: an error saying the plan still runs and how to stop it
//     (exit 1; waiting again is `slotctl apply PLAN_ID --wait`)
//
// A plan paused by an operator is waited for: someone may resume it.
func (g *globals) waitPlan(ctx context.Context, c *conn, id string, w io.Writer) (*slotdv1.Plan, error) {
	pr := newProgress(w, g.tty(), id)
	tick := time.NewTicker(g.poll)
	defer tick.Stop()
	for {
		cctx, cancel := g.call(ctx)
		resp, err := c.admin.GetPlan(cctx, &slotdv1.GetPlanRequest{PlanId: id})
		cancel()
		if ctx.Err() != nil {
			pr.end()
			return nil, fmt.Errorf("interrupted; plan %s is still running; stop it with: slotctl cancel %s (follow it again with: slotctl apply %s --wait)", id, id, id)
		}
		if err != nil {
			pr.end()
			return nil, err
		}
		p := resp.GetPlan()
		pr.update(p, time.Now())
		switch p.GetState() {
		case slotdv1.PlanState_PLAN_STATE_DONE:
			pr.end()
			return p, nil
		case slotdv1.PlanState_PLAN_STATE_FAILED:
			pr.end()
			return p, fmt.Errorf("plan %s failed: %s; see slotctl history --plan %s, undo its moves with: slotctl rollback %s", id, orDash(p.GetError()), id, id)
		case slotdv1.PlanState_PLAN_STATE_PAUSED:
			if p.GetError() != "" {
				pr.end()
				return p, fmt.Errorf("plan %s paused after a failure: %s; fix it, then slotctl resume %s (or slotctl cancel %s)", id, p.GetError(), id, id)
			}
		case slotdv1.PlanState_PLAN_STATE_CANCELLED:
			pr.end()
			return p, refusedError{fmt.Errorf("plan %s was cancelled (by %s); committed moves stay: undo them with slotctl rollback %s", id, orDash(p.GetOperator()), id)}
		case slotdv1.PlanState_PLAN_STATE_ROLLED_BACK:
			pr.end()
			return p, refusedError{fmt.Errorf("plan %s was rolled back by plan %s; follow that with: slotctl apply %s --wait", id, p.GetRolledBackBy(), p.GetRolledBackBy())}
		case slotdv1.PlanState_PLAN_STATE_PROPOSED:
			pr.end()
			return p, refusedError{fmt.Errorf("plan %s is not applying; apply it with: slotctl apply %s", id, id)}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// progress draws a plan's progress. Rates and ETAs come from what this
// process saw since it started waiting.
type progress struct {
	w   io.Writer
	tty bool
	id  string

	start     time.Time
	startDone uint64 // bytes done when the wait started
	last      time.Time
	lastStep  int // last 5% step printed, -1 before the first line
	lastState slotdv1.PlanState
	drawn     bool // a bar is on the current terminal line
}

func newProgress(w io.Writer, tty bool, id string) *progress {
	return &progress{w: w, tty: tty, id: id, lastStep: -1}
}

func (p *progress) update(plan *slotdv1.Plan, now time.Time) {
	if p.w == nil {
		return
	}
	pr := plan.GetProgress()
	if p.start.IsZero() {
		p.start, p.startDone = now, pr.GetBytesDone()
	}
	done, total := pr.GetDone()+pr.GetSkipped()+pr.GetAborted(), pr.GetMoves()
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	var rate float64
	if el := now.Sub(p.start).Seconds(); el > 0 {
		rate = float64(pr.GetBytesDone()-min(p.startDone, pr.GetBytesDone())) / el
	}
	eta := "-"
	switch {
	case done == total:
		eta = "0s"
	case rate > 0 && pr.GetBytes() > pr.GetBytesDone():
		eta = formatDuration(time.Duration(float64(pr.GetBytes()-pr.GetBytesDone()) / rate * float64(time.Second)))
	case done > 0 && now.After(p.start):
		// Empty slots: estimate by moves.
		perMove := now.Sub(p.start) / time.Duration(done)
		eta = formatDuration(perMove * time.Duration(total-done))
	}
	state := planState(plan.GetState())
	stats := fmt.Sprintf("%d/%d slots  %s/%s  %s/s  ETA %s", done, total,
		formatBytes(pr.GetBytesDone()), formatBytes(pr.GetBytes()), formatBytes(uint64(rate)), eta)
	if p.tty {
		const width = 30
		n := int(frac * width)
		bar := strings.Repeat("=", n) + strings.Repeat(" ", width-n)
		if n < width {
			bar = bar[:n] + ">" + bar[n+1:]
		}
		fmt.Fprintf(p.w, "\r\x1b[K[%s] %3.0f%%  %s  %s", bar, frac*100, stats, state)
		p.drawn = true
		return
	}
	step := int(frac * 20)
	changed := step != p.lastStep || plan.GetState() != p.lastState
	due := now.Sub(p.last) >= time.Second && (changed || now.Sub(p.last) >= 10*time.Second)
	final := plan.GetState() != slotdv1.PlanState_PLAN_STATE_APPLYING && plan.GetState() != slotdv1.PlanState_PLAN_STATE_PAUSED
	if p.lastStep >= 0 && !due && !final {
		return
	}
	if final && !changed && p.lastStep >= 0 {
		return
	}
	fmt.Fprintf(p.w, "plan %s %s: %3.0f%%  %s\n", p.id, state, frac*100, stats)
	p.last, p.lastStep, p.lastState = now, step, plan.GetState()
}

// end finishes the bar's line.
func (p *progress) end() {
	if p.w != nil && p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}
