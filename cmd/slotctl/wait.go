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

// progress draws a plan's progress. The pace comes from the plan itself:
// the time since its first move started, the moves finished and the bytes
// its transfers copied, so a wait that joins a running plan late shows the
// same ETA as one that watched it from the start.
type progress struct {
	w   io.Writer
	tty bool
	id  string

	start     time.Time // when this wait began: the pace's origin until a move has started
	last      time.Time
	lastStep  int // last 5% step printed, -1 before the first line
	lastState slotdv1.PlanState
	drawn     bool // a bar is on the current terminal line
}

func newProgress(w io.Writer, tty bool, id string) *progress {
	return &progress{w: w, tty: tty, id: id, lastStep: -1}
}

// pace is a running plan's measured progress.
type pace struct {
	elapsed  time.Duration // since the first move started
	copied   uint64        // bytes the transfers copied (measured; 0 when slotd reports none)
	rate     float64       // bytes per second: measured, else estimated (estimated true)
	eta      time.Duration // -1 when there is nothing to go on yet
	estimate bool          // rate is from the planner's estimates, not from transfers
}

// paceOf measures plan at now: per-move time and byte rate since its first
// move started (since origin when no move has), and from them the time
// left: the larger of what the moves left would take at the per-move time
// and what the estimated bytes left would take at the pace so far.
func paceOf(plan *slotdv1.Plan, origin, now time.Time) pace {
	pr := plan.GetProgress()
	first := origin
	var out pace
	for _, m := range plan.GetMoves() {
		if st := m.GetStartedAt(); st != nil && st.AsTime().Before(first) {
			first = st.AsTime()
		}
		out.copied += m.GetBytesCopied()
	}
	// Without moves (a plan list), the done moves' total.
	out.copied = max(out.copied, pr.GetBytesCopied())
	out.elapsed = now.Sub(first)
	out.estimate = out.copied == 0
	done, total := pr.GetDone()+pr.GetSkipped()+pr.GetAborted(), pr.GetMoves()
	out.eta = -1
	if done >= total {
		out.eta = 0
	}
	el := out.elapsed.Seconds()
	if el <= 0 {
		return out
	}
	if out.estimate {
		out.rate = float64(pr.GetBytesDone()) / el
	} else {
		out.rate = float64(out.copied) / el
	}
	if done == 0 || done >= total {
		return out
	}
	perMove := out.elapsed / time.Duration(done)
	out.eta = perMove * time.Duration(total-done)
	if est := pr.GetBytesDone(); est > 0 && pr.GetBytes() > est {
		byBytes := time.Duration(float64(out.elapsed) * float64(pr.GetBytes()-est) / float64(est))
		out.eta = max(out.eta, byBytes)
	}
	return out
}

func (p *progress) update(plan *slotdv1.Plan, now time.Time) {
	if p.w == nil {
		return
	}
	pr := plan.GetProgress()
	if p.start.IsZero() {
		p.start = now
	}
	done, total := pr.GetDone()+pr.GetSkipped()+pr.GetAborted(), pr.GetMoves()
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	pc := paceOf(plan, p.start, now)
	eta := "-"
	if pc.eta >= 0 {
		eta = formatDuration(pc.eta)
	}
	bytes := fmt.Sprintf("~%s/~%s", formatBytes(pr.GetBytesDone()), formatBytes(pr.GetBytes()))
	rate := "~" + formatBytes(uint64(pc.rate)) + "/s"
	if !pc.estimate {
		bytes = fmt.Sprintf("%s copied of ~%s", formatBytes(pc.copied), formatBytes(pr.GetBytes()))
		rate = formatBytes(uint64(pc.rate)) + "/s"
	}
	state := planState(plan.GetState())
	stats := fmt.Sprintf("%d/%d slots  %s  %s  ETA %s", done, total, bytes, rate, eta)
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
