package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newPlanCmd) }

// planFlags are the node edits and limits of plan and rebalance.
type planFlags struct {
	add       []string
	drain     []string
	weights   []string
	maxMoves  uint32
	maxBytes  string
	balanceBy string
	tolerance float64
	reason    string
}

func (f *planFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.add, "add", nil, "plan adding a node, ID=HOST:PORT[,zone=Z][,weight=W]; repeatable")
	fs.StringSliceVar(&f.drain, "drain", nil, "plan emptying a node, by id; repeatable")
	fs.StringArrayVar(&f.weights, "weight", nil, "plan a new weight, ID=W (0 empties the node); repeatable")
	fs.Uint32Var(&f.maxMoves, "max-moves", 0, "stop the plan after this many moves (0: as many as balance needs)")
	fs.StringVar(&f.maxBytes, "max-bytes", "0", "stop the plan before it copies more than this, e.g. 64MiB (0: no limit)")
	fs.StringVar(&f.balanceBy, "balance-by", "", "what to balance: slots, bytes, ops or auto (bytes and ops together); default: slotd's --balance-by")
	fs.Float64Var(&f.tolerance, "tolerance", 0, "dead band: nodes within this fraction of their share are balanced (0: 0.10)")
	fs.StringVar(&f.reason, "reason", "", "why, recorded with the plan")
}

// request checks the flags and builds the Plan request; nothing is sent.
func (f *planFlags) request(operator string) (*slotdv1.PlanRequest, error) {
	req := &slotdv1.PlanRequest{MaxMoves: f.maxMoves, Operator: operator, Reason: f.reason, Tolerance: f.tolerance}
	switch f.balanceBy {
	case "", "slots", "bytes", "ops", "auto":
		req.BalanceBy = f.balanceBy
	default:
		return nil, usagef("--balance-by %q: want slots, bytes, ops or auto", f.balanceBy)
	}
	if f.tolerance < 0 || f.tolerance >= 1 || f.tolerance != f.tolerance {
		return nil, usagef("--tolerance %v: want a fraction from 0 to below 1, e.g. 0.1 for 10%%", f.tolerance)
	}
	if f.maxBytes != "" && f.maxBytes != "0" {
		n, err := parseRate(f.maxBytes)
		if err != nil {
			return nil, usagef("--max-bytes %q: give a size like 64MiB (units B, KB, MB, GB, KiB, MiB, GiB) or 0 for no limit", f.maxBytes)
		}
		req.MaxBytes = n
	}
	seen := map[string]string{}
	claim := func(id, how string) error {
		if prev, ok := seen[id]; ok {
			return usagef("node %s is given twice (%s and %s)", id, prev, how)
		}
		seen[id] = how
		return nil
	}
	for _, s := range f.add {
		n, err := parseNodeSpec(s)
		if err != nil {
			return nil, err
		}
		if err := claim(n.Id, "--add"); err != nil {
			return nil, err
		}
		req.Add = append(req.Add, n)
	}
	for _, id := range f.drain {
		if err := checkNodeID(id); err != nil {
			return nil, err
		}
		if err := claim(id, "--drain"); err != nil {
			return nil, err
		}
		req.Drain = append(req.Drain, id)
	}
	for _, s := range f.weights {
		id, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, usagef("--weight %q: want ID=W, e.g. n1=2", s)
		}
		if err := checkNodeID(id); err != nil {
			return nil, err
		}
		w, err := parseWeight(v)
		if err != nil {
			return nil, err
		}
		if err := claim(id, "--weight"); err != nil {
			return nil, err
		}
		if req.Weights == nil {
			req.Weights = map[string]uint32{}
		}
		req.Weights[id] = w
	}
	return req, nil
}

// propose asks slotd for a plan and the throttle it was estimated at.
func (g *globals) propose(ctx context.Context, c *conn, req *slotdv1.PlanRequest) (*slotdv1.Plan, uint64, error) {
	cctx, cancel := g.call(ctx)
	defer cancel()
	resp, err := c.admin.Plan(cctx, req)
	if err != nil {
		return nil, 0, err
	}
	// The estimate was made at the throttle in force; show which. A status
	// that fails here costs only that line.
	var rate uint64
	if st, err := c.admin.Status(cctx, &slotdv1.StatusRequest{}); err == nil {
		rate = st.GetThrottle().GetDefaultBytesPerSecond()
	}
	return resp.GetPlan(), rate, nil
}

// previewMoves is how many moves the table preview lists.
const previewMoves = 10

// printPlanPreview prints a plan before it is applied: moves, bytes,
// per-node before and after, estimated time.
func printPlanPreview(w io.Writer, p *slotdv1.Plan, rate uint64) error {
	fmt.Fprintf(w, "plan %s (base version %d, %s)\n", p.GetId(), p.GetBaseVersion(), planState(p.GetState()))
	fmt.Fprintf(w, "%d moves, ~%s (estimated), about %s at %s\n", len(p.GetMoves()), formatBytes(p.GetTotalBytes()),
		formatDuration(p.GetEstimated().AsDuration()), formatRate(rate))
	if u := p.GetSizesUnknown(); len(u) > 0 {
		fmt.Fprintf(w, "warning: slot sizes unknown for %s (could not be asked, or their answer was ignored: see the note): bytes are not known, and the time counts moves only\n",
			strings.Join(u, ", "))
	}
	if e := p.GetEdits(); e != nil {
		for _, n := range e.GetAdd() {
			fmt.Fprintf(w, "adds node %s at %s (zone %s, weight %d)\n", n.GetId(), n.GetAddress(), orDash(n.GetZone()), max(n.GetWeight(), 1))
		}
		for _, id := range e.GetDrain() {
			fmt.Fprintf(w, "drains node %s\n", id)
		}
		for _, id := range sortedKeys(e.GetWeights()) {
			fmt.Fprintf(w, "sets the weight of %s to %d\n", id, e.GetWeights()[id])
		}
	}
	size := formatBytes
	if len(p.GetSizesUnknown()) > 0 {
		size = func(uint64) string { return "?" }
	}
	printPlanLoad(w, p)
	fmt.Fprintln(w)
	measured := slices.ContainsFunc(p.GetNodes(), (*slotdv1.NodeBalance).GetLoadKnown)
	header := []string{"NODE", "SLOTS BEFORE", "SLOTS AFTER", "CHANGE", "TARGET", "~BYTES BEFORE", "~BYTES AFTER"}
	if measured {
		header = append(header, "BYTES RATIO", "OPS RATIO")
	}
	t := newTable(w, header...)
	for _, n := range p.GetNodes() {
		target := "-" // not active: its share is none
		if n.GetTargetSlots() > 0 {
			target = fmt.Sprint(n.GetTargetSlots())
		}
		row := []any{n.GetNodeId(), n.GetSlotsBefore(), n.GetSlotsAfter(), fmt.Sprintf("%+d", int64(n.GetSlotsAfter())-int64(n.GetSlotsBefore())),
			target, size(n.GetBytesBefore()), size(n.GetBytesAfter())}
		if measured {
			b, a := n.GetLoadBefore(), n.GetLoadAfter()
			switch {
			case !n.GetLoadKnown():
				row = append(row, "unknown", "unknown")
			case b.GetBytesRatio() == 0 && a.GetBytesRatio() == 0 && b.GetOpsRatio() == 0 && a.GetOpsRatio() == 0:
				row = append(row, "-", "-") // not active: no share
			default:
				row = append(row, fmt.Sprintf("%.2f -> %.2f", b.GetBytesRatio(), a.GetBytesRatio()), fmt.Sprintf("%.2f -> %.2f", b.GetOpsRatio(), a.GetOpsRatio()))
			}
		}
		t.row(row...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(p.GetMoves()) > 0 {
		fmt.Fprintln(w)
		t := newTable(w, "SLOT", "FROM", "TO", "~BYTES", "REASON")
		for _, m := range p.GetMoves()[:min(len(p.GetMoves()), previewMoves)] {
			t.row(m.GetSlot(), m.GetFrom(), m.GetTo(), size(m.GetBytes()), orDash(m.GetReason()))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if n := len(p.GetMoves()) - previewMoves; n > 0 {
			fmt.Fprintf(w, "... and %d more moves (all of them: -o json)\n", n)
		}
	}
	return nil
}

func newPlanCmd(g *globals) *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan [--add ID=ADDR ...] [--drain ID ...] [--weight ID=W ...]",
		Short: "Preview a rebalance: moves, bytes, per-node before/after, estimated time; moves nothing",
		Long: `plan computes the minimum set of single-slot moves that balances the cluster
for the node changes given (none: balance the current nodes), stores it as a
proposed plan and shows it. Nothing changes until you apply it:

  slotctl apply PLAN_ID --wait

-o json writes the plan file (the protojson form of slotd.v1.Plan), which
slotctl apply reads back, so a plan can be reviewed and applied later or
elsewhere. Node edits are made by apply, not by plan.`,
		Example: `  slotctl plan --add n4=127.0.0.1:7504
  slotctl plan --add n4=127.0.0.1:7504 -o json > plan.json
  slotctl plan --drain n3 --max-moves 100`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := f.request(g.operator)
			if err != nil {
				return err
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				p, rate, err := g.propose(ctx, c, req)
				if err != nil {
					return err
				}
				return g.printPlan(p, func(w io.Writer) error {
					if err := printPlanPreview(w, p, rate); err != nil {
						return err
					}
					if len(p.GetMoves()) == 0 && p.GetEdits() == nil {
						msg := "nothing to move: the cluster is balanced"
						if strings.HasSuffix(p.GetNote(), "nothing to do") {
							msg = p.GetNote()
						}
						_, err := fmt.Fprintln(w, "\n"+msg)
						return err
					}
					_, err := fmt.Fprintf(w, "\napply it with: slotctl apply %s --wait\n", p.GetId())
					return err
				})
			})
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// printPlan prints a plan: its JSON form (planJSON) with -o json.
func (g *globals) printPlan(p *slotdv1.Plan, tableFn func(io.Writer) error) error {
	raw, err := planJSON(p)
	if err != nil {
		return err
	}
	return g.print(raw, tableFn)
}

// printPlanLoad prints what the plan balanced and what it could not: the
// mode and band with the planner's note, nodes of unknown load, hot spots
// moving cannot fix, and slots that cannot move (their owner is down).
func printPlanLoad(w io.Writer, p *slotdv1.Plan) {
	if by := p.GetBalanceBy(); by != "" {
		line := "balances " + by
		if by != "slots" {
			tol := p.GetTolerance()
			line += fmt.Sprintf(" within %g%% of each node's share", tol*100)
		}
		if n := p.GetNote(); n != "" {
			line += ": " + n
		}
		fmt.Fprintln(w, line)
	}
	if u := p.GetUnknownNodes(); len(u) > 0 {
		fmt.Fprintf(w, "load unknown (no recent report; they neither give nor take): %s\n", strings.Join(u, ", "))
	}
	for _, h := range p.GetHotSpots() {
		tag := ""
		if h.GetTag() != "" {
			tag = ", hash tag " + h.GetTag()
		}
		fmt.Fprintf(w, "hot spot: slot %d on %s carries %.0f%% of its %s share alone%s; moving cannot fix it: it stays, its other slots leave\n",
			h.GetSlot(), h.GetNodeId(), h.GetShare()*100, h.GetDimension(), tag)
	}
	for _, b := range p.GetBlocked() {
		ranges := b.GetSlots()
		if len(ranges) > 40 {
			ranges = ranges[:strings.LastIndexByte(ranges[:40], ',')+1] + "..."
		}
		fmt.Fprintf(w, "blocked: %d slots of %s (%s): %s\n", b.GetCount(), b.GetNodeId(), ranges, b.GetReason())
	}
}
