package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newAutoCmd) }

// autoJSON is `slotctl auto ... -o json`: the policy and what the balancer
// is doing, after the change for the commands that change something.
//
//	{"policy": {"enabled": true, "frozen": false, "tolerance": 0.1, "window": "10m0s",
//	  "interval": "5m0s", "budget_moves_per_hour": 1024, "budget_bytes_per_hour": 68719476736,
//	  "balance_by": "auto", "updated_by": "alice", "updated": "2026-01-02T03:04:05Z", "reason": ""},
//	 "state": {"state": "watching", "decision": "balanced within 10%", "decided_at": "...",
//	  "failures": 0, "backoff_until": "", "backoff_seconds": 0, "last_plan": "", "last_plan_at": "",
//	  "moves_last_hour": 0, "bytes_last_hour": 0, "leader": "s1", "next_check": ""}}
//
// next_check is worked out by slotctl (see nextCheck), not stored by the
// balancer. `slotctl status -o json` carries the same object as "balancer".
type autoJSON struct {
	Policy autoPolicyJSON `json:"policy"`
	State  autoStateJSON  `json:"state"`
}

type autoPolicyJSON struct {
	Enabled     bool    `json:"enabled"`
	Frozen      bool    `json:"frozen"`
	Tolerance   float64 `json:"tolerance"`
	Window      string  `json:"window"`
	Interval    string  `json:"interval"`
	BudgetMoves uint64  `json:"budget_moves_per_hour"`
	BudgetBytes uint64  `json:"budget_bytes_per_hour"`
	BalanceBy   string  `json:"balance_by"`
	UpdatedBy   string  `json:"updated_by"`
	Updated     string  `json:"updated"`
	Reason      string  `json:"reason"`
}

type autoStateJSON struct {
	State          string  `json:"state"`
	Decision       string  `json:"decision"`
	DecidedAt      string  `json:"decided_at"`
	Failures       uint32  `json:"failures"`
	BackoffUntil   string  `json:"backoff_until"`
	BackoffSeconds float64 `json:"backoff_seconds"`
	LastPlan       string  `json:"last_plan"`
	LastPlanAt     string  `json:"last_plan_at"`
	MovesLastHour  uint64  `json:"moves_last_hour"`
	BytesLastHour  uint64  `json:"bytes_last_hour"`
	Leader         string  `json:"leader"`
	// NextCheck is the earliest time the balancer may plan again, as far
	// as its status tells; see nextCheck.
	NextCheck string `json:"next_check"`
}

// autoOf is the JSON form of r; now (slotctl's clock) dates next_check.
func autoOf(r *slotdv1.AutoStatusResponse, now time.Time) autoJSON {
	p, s := r.GetPolicy(), r.GetState()
	return autoJSON{
		Policy: autoPolicyJSON{
			Enabled: p.GetEnabled(), Frozen: p.GetFrozen(), Tolerance: p.GetTolerance(),
			Window: p.GetWindow().AsDuration().String(), Interval: p.GetInterval().AsDuration().String(),
			BudgetMoves: p.GetBudgetMovesPerHour(), BudgetBytes: p.GetBudgetBytesPerHour(), BalanceBy: p.GetBalanceBy(),
			UpdatedBy: p.GetUpdatedBy(), Updated: timeJSON(p.GetUpdated()), Reason: p.GetReason(),
		},
		State: autoStateJSON{
			State: s.GetState(), Decision: s.GetDecision(), DecidedAt: timeJSON(s.GetDecidedAt()),
			Failures: s.GetFailures(), BackoffUntil: timeJSON(s.GetBackoffUntil()), BackoffSeconds: s.GetBackoff().AsDuration().Seconds(),
			LastPlan: s.GetLastPlan(), LastPlanAt: timeJSON(s.GetLastPlanAt()),
			MovesLastHour: s.GetMovesLastHour(), BytesLastHour: s.GetBytesLastHour(), Leader: s.GetLeader(),
			NextCheck: nextCheck(r, now),
		},
	}
}

// nextCheck is the earliest time the balancer may plan again, as far as
// its status tells: the end of its backoff (running by the server's clock),
// or its interval after its last automatic plan (still running at now),
// whichever is later. "" when it is off or frozen, or neither holds it back:
// it then decides at every tick of the mover leader (5 s by default), and
// plans once an imbalance has lasted its window. The status does not say
// when an operator's action (whose interval also holds it back) was, nor
// when an imbalance started: the decision says those in words.
func nextCheck(r *slotdv1.AutoStatusResponse, now time.Time) string {
	p, s := r.GetPolicy(), r.GetState()
	if !p.GetEnabled() || p.GetFrozen() {
		return ""
	}
	var next time.Time
	if s.GetBackoff().AsDuration() > 0 && s.GetBackoffUntil() != nil {
		next = s.GetBackoffUntil().AsTime()
	}
	if at := s.GetLastPlanAt(); at != nil {
		if t := at.AsTime().Add(p.GetInterval().AsDuration()); t.After(now) && t.After(next) {
			next = t
		}
	}
	if next.IsZero() {
		return ""
	}
	return next.UTC().Format(time.RFC3339Nano)
}

func (a autoJSON) table(w io.Writer) error {
	p, s := a.Policy, a.State
	onOff := map[bool]string{true: "on", false: "off"}
	budget := "none"
	if p.BudgetMoves > 0 || p.BudgetBytes > 0 {
		budget = fmt.Sprintf("%s moves, %s per hour", limitOf(p.BudgetMoves, strconv.FormatUint(p.BudgetMoves, 10)), limitOf(p.BudgetBytes, formatBytes(p.BudgetBytes)))
	}
	t := newTable(w)
	t.row("balancer", onOff[p.Enabled])
	if p.Frozen {
		t.row("frozen", "yes")
	}
	t.row("state", orDash(s.State))
	t.row("decision", orDash(s.Decision))
	t.row("tolerance", fmt.Sprintf("%g%%", p.Tolerance*100))
	t.row("window", p.Window)
	t.row("interval", p.Interval)
	t.row("budget", budget)
	t.row("balance by", p.BalanceBy)
	t.row("spent last hour", fmt.Sprintf("%d moves, %s", s.MovesLastHour, formatBytes(s.BytesLastHour)))
	if s.Failures > 0 || s.BackoffSeconds > 0 {
		t.row("backoff", fmt.Sprintf("%d failed plan(s); next try in %s", s.Failures, formatDuration(time.Duration(s.BackoffSeconds*float64(time.Second)))))
	}
	t.row("last plan", orDash(s.LastPlan)+" "+orDash(s.LastPlanAt))
	t.row("next check", orDash(s.NextCheck))
	t.row("leader", orDash(s.Leader))
	t.row("policy by", orDash(p.UpdatedBy)+" "+orDash(p.Updated)+reasonSuffix(p.Reason))
	return t.flush()
}

func limitOf(v uint64, s string) string {
	if v == 0 {
		return "any"
	}
	return s
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return " (" + r + ")"
}

func newAutoCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auto",
		Short: "The automatic balancer: status, on, off, set KEY=VALUE, freeze, unfreeze",
		Long: `The automatic balancer runs on the mover's leader. When it is on, it plans a
rebalance by itself when a node was added (fill it) or set draining (empty it),
or when a node's load ratio stayed outside the tolerance for the whole window;
at most once per interval, within the hourly budget, never while a plan applies
or is paused. Its plans are ordinary plans (operator "auto", a reason, history,
pause, cancel, rollback); an operator's plan, pause or cancel always wins.
freeze stops new automatic plans at once (an incident switch).

Keys for set: enabled (true/false), frozen, tolerance (0.1 or 10%), window and
interval (durations: 10m, 30s), budget-moves (per hour, 0: no bound),
budget-bytes (per hour: 64GiB, 0: no bound), balance-by (auto, slots, bytes, ops).`,
		Example: `  slotctl auto status
  slotctl auto on --reason "scale-out week"
  slotctl auto set tolerance=5% window=15m budget-bytes=10GiB
  slotctl auto freeze --reason "incident 4711"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("say what to do: slotctl auto status|on|off|set KEY=VALUE...|freeze|unfreeze (see slotctl auto --help)")
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use: "status", Short: "Show the balancer's policy and what it is doing", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return autoCall(cmd.Context(), g, nil) },
	})
	change := func(use, short string, args cobra.PositionalArgs, req func([]string) (*slotdv1.SetAutoPolicyRequest, error)) {
		var reason string
		c := &cobra.Command{
			Use: use, Short: short, Args: args,
			RunE: func(cmd *cobra.Command, args []string) error {
				r, err := req(args)
				if err != nil {
					return err
				}
				r.Reason = reason
				return autoCall(cmd.Context(), g, r)
			},
		}
		c.Flags().StringVar(&reason, "reason", "", "why, recorded with the change")
		cmd.AddCommand(c)
	}
	yes, no := true, false
	change("on", "Turn the balancer on", cobra.NoArgs, func([]string) (*slotdv1.SetAutoPolicyRequest, error) {
		return &slotdv1.SetAutoPolicyRequest{Enabled: &yes}, nil
	})
	change("off", "Turn the balancer off (a plan it started goes on; pause or cancel it as any plan)", cobra.NoArgs, func([]string) (*slotdv1.SetAutoPolicyRequest, error) {
		return &slotdv1.SetAutoPolicyRequest{Enabled: &no}, nil
	})
	change("freeze", "Stop every new automatic plan until unfreeze", cobra.NoArgs, func([]string) (*slotdv1.SetAutoPolicyRequest, error) {
		return &slotdv1.SetAutoPolicyRequest{Frozen: &yes}, nil
	})
	change("unfreeze", "Let the balancer plan again", cobra.NoArgs, func([]string) (*slotdv1.SetAutoPolicyRequest, error) {
		return &slotdv1.SetAutoPolicyRequest{Frozen: &no}, nil
	})
	change("set KEY=VALUE...", "Change policy keys (see slotctl auto --help)", cobra.MinimumNArgs(1), parseAutoSet)
	return cmd
}

// parseAutoSet reads `slotctl auto set` arguments into a request.
func parseAutoSet(args []string) (*slotdv1.SetAutoPolicyRequest, error) {
	const keys = "enabled, frozen, tolerance, window, interval, budget-moves, budget-bytes, balance-by"
	r := &slotdv1.SetAutoPolicyRequest{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || v == "" {
			return nil, usagef("%q: give KEY=VALUE (keys: %s)", a, keys)
		}
		switch strings.ReplaceAll(k, "_", "-") {
		case "enabled", "frozen":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, usagef("%s=%q: give true or false", k, v)
			}
			if k == "enabled" {
				r.Enabled = &b
			} else {
				r.Frozen = &b
			}
		case "tolerance":
			pct := strings.HasSuffix(v, "%")
			f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
			if pct {
				f /= 100
			}
			if err != nil || math.IsNaN(f) || f <= 0 || f >= 1 {
				return nil, usagef("tolerance=%q: give a fraction above 0 and below 1 (0.1) or a percentage (10%%)", v)
			}
			r.Tolerance = &f
		case "window", "interval":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return nil, usagef("%s=%q: give a duration like 10m or 30s", k, v)
			}
			if k == "window" {
				r.Window = durationpb.New(d)
			} else {
				r.Interval = durationpb.New(d)
			}
		case "budget-moves":
			n, err := strconv.ParseUint(v, 10, 31)
			if err != nil {
				return nil, usagef("budget-moves=%q: give a number of moves per hour (0: no bound)", v)
			}
			r.BudgetMovesPerHour = &n
		case "budget-bytes":
			n, err := parseRate(v)
			if err != nil {
				return nil, usagef("budget-bytes=%q: give a size per hour like 64GiB or 500MB (0: no bound)", v)
			}
			r.BudgetBytesPerHour = &n
		case "balance-by":
			r.BalanceBy = &v
		default:
			return nil, usagef("unknown key %q (keys: %s)", k, keys)
		}
	}
	return r, nil
}

// autoCall sets the policy when req is not nil, else reads it, and prints
// what the server answers.
func autoCall(ctx context.Context, g *globals, req *slotdv1.SetAutoPolicyRequest) error {
	return g.withConn(ctx, func(ctx context.Context, c *conn) error {
		cctx, cancel := g.call(ctx)
		defer cancel()
		var out *autoJSON
		var err error
		if req == nil {
			out, err = readAuto(cctx, c)
		} else {
			req.Operator = g.operator
			var resp *slotdv1.AutoStatusResponse
			if resp, err = c.auto.SetPolicy(cctx, req); err == nil {
				a := autoOf(resp, time.Now())
				out = &a
			}
		}
		if err != nil {
			return err
		}
		return g.print(out, out.table)
	})
}

// readAuto reads the balancer's policy and state: the call of `slotctl
// auto status`, and of the balancer line of `slotctl status`.
func readAuto(ctx context.Context, c *conn) (*autoJSON, error) {
	resp, err := c.auto.Status(ctx, &slotdv1.AutoStatusRequest{})
	if err != nil {
		return nil, err
	}
	a := autoOf(resp, time.Now())
	return &a, nil
}

// line is the balancer in one line, for `slotctl status`: "balancer: off";
// "balancer: frozen, no new automatic plan; policy changed
// 2026-01-02T11:58:00Z by alice ("incident 4711")"; or "balancer: on,
// waiting; last decision 2026-01-02T12:00:08Z "plan p-7-... is applying (by
// auto)"; last plan p-7-... at 2026-01-02T12:00:03Z; next check
// 2026-01-02T12:05:03Z", each part only when known. Times are to the second.
func (a autoJSON) line() string {
	p, s := a.Policy, a.State
	switch {
	case !p.Enabled:
		return "balancer: off"
	case p.Frozen:
		line := "balancer: frozen, no new automatic plan"
		if p.Updated != "" {
			line += "; policy changed " + toSecond(p.Updated) + " by " + orDash(p.UpdatedBy)
			if p.Reason != "" {
				line += fmt.Sprintf(" (%q)", p.Reason)
			}
		}
		return line
	}
	var b strings.Builder
	fmt.Fprintf(&b, "balancer: on, %s", orDash(s.State))
	if s.Decision != "" {
		b.WriteString("; last decision ")
		// A balancer turned on (or unfrozen) since it last decided: the
		// server words it, and the time is of the older decision.
		if s.DecidedAt != "" && s.State != "starting" {
			b.WriteString(toSecond(s.DecidedAt) + " ")
		}
		fmt.Fprintf(&b, "%q", s.Decision)
	}
	if s.LastPlan != "" {
		b.WriteString("; last plan " + s.LastPlan)
		if s.LastPlanAt != "" {
			b.WriteString(" at " + toSecond(s.LastPlanAt))
		}
	}
	if s.NextCheck != "" {
		b.WriteString("; next check " + toSecond(s.NextCheck))
	}
	return b.String()
}

// balancerLine is the balancer line of `slotctl status`: a's line, or why
// the balancer is unknown when readAuto failed with err.
func balancerLine(a *autoJSON, err error) string {
	if a != nil {
		return a.line()
	}
	var se grpcStatus
	switch {
	case err == nil:
		return "balancer: unknown"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "balancer: unknown (no answer in time)"
	case !errors.As(err, &se):
		return fmt.Sprintf("balancer: unknown (%v)", err)
	}
	st := se.GRPCStatus()
	switch st.Code() {
	case codes.Unimplemented:
		return "balancer: unknown (this slotd does not offer its status: older server?)"
	case codes.PermissionDenied, codes.Unauthenticated:
		return fmt.Sprintf("balancer: unknown (refused: %s)", st.Message())
	case codes.DeadlineExceeded, codes.Canceled:
		// Either side may see the deadline first: the caller's gRPC says
		// DeadlineExceeded, a server that gave up first makes it Canceled.
		return "balancer: unknown (no answer in time)"
	}
	return fmt.Sprintf("balancer: unknown (%s)", st.Message())
}

// toSecond prints an RFC 3339 time of the JSON to the second, as the
// tables do; anything else as it is.
func toSecond(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format(time.RFC3339)
}
