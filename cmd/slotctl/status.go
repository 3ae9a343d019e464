package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/clusterstatus"
	"github.com/slotd/slotd/load"
)

func init() { register(newStatusCmd) }

// statusJSON is `slotctl status -o json`: the cluster's status
// (clusterstatus.Status, documented there and in docs/slotctl-json.md)
// and, last, the balancer:
//
//	{..., "balancer": <autoJSON, as slotctl auto status -o json> or null}
//
// balancer is null when the balancer's status could not be read (an older
// slotd, or the call was refused).
type statusJSON struct {
	clusterstatus.Status
	Balancer *autoJSON `json:"balancer"`
}

func newStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the directory version, replication (rf, min isr, under-replicated slots, zone spread), nodes and their load, moves in flight, the active plan, the balancer, the throttle",
		Example: `  slotctl status
  slotctl status -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				st, err := c.admin.Status(cctx, &slotdv1.StatusRequest{})
				if err != nil {
					return err
				}
				// Orphan bytes ride the nodes' heartbeats into their
				// liveness records: ListNodes has them. Status still
				// prints without them (an older slotd).
				var infos []*slotdv1.NodeInfo
				if ln, err := c.dir.ListNodes(cctx, &slotdv1.ListNodesRequest{}); err == nil {
					infos = ln.GetNodes()
				}
				lv, _, err := loadView(cctx, c, false)
				if err != nil {
					return err
				}
				// The balancer's line: status prints without it, saying
				// why (an older slotd, a refusal, no answer in time), and
				// exits as it would have. Read last, so that a slow answer
				// costs no other part.
				auto, autoErr := readAuto(cctx, c)
				return g.printStatus(st, infos, lv, auto, autoErr)
			})
		},
	}
}

// printStatus prints st, with the orphan bytes and leases of infos (nil
// from a slotd whose ListNodes failed), the load of lv and the balancer's
// status auto (nil when readAuto failed with autoErr).
func (g *globals) printStatus(st *slotdv1.StatusResponse, infos []*slotdv1.NodeInfo, lv load.View, auto *autoJSON, autoErr error) error {
	out := statusJSON{Status: clusterstatus.Build(st, infos, lv), Balancer: auto}
	return g.print(out, func(w io.Writer) error {
		fmt.Fprintf(w, "version %d, server %s, mover leader %s, throttle %s\n%s\n\n",
			out.Version, orDash(out.Server), orDash(out.MoverLeader), formatRate(out.Throttle), replicationLines(out.Replication))
		t := newTable(w, "NODE", "ADDRESS", "ZONE", "WEIGHT", "STATE", "SLOTS", "TARGET", "SLOT RATIO", "BYTES", "BYTES RATIO", "OPS/S", "OPS RATIO")
		for _, n := range out.Nodes {
			target, ratio := "-", "-"
			if n.TargetSlots > 0 {
				target, ratio = fmt.Sprint(n.TargetSlots), fmt.Sprintf("%.2f", n.Load)
			}
			bytes, bratio, ops, oratio := "unknown", "-", "unknown", "-"
			if m := n.Measured; m != nil {
				bytes, bratio, ops, oratio = formatBytes(m.Bytes), ratioText(m.BytesRatio), rateText(m.Ops), ratioText(m.OpsRatio)
			}
			t.row(n.ID, n.Address, orDash(n.Zone), n.Weight, n.State, n.Slots, target, ratio, bytes, bratio, ops, oratio)
		}
		if err := t.flush(); err != nil {
			return err
		}
		if len(out.LoadUnknown) > 0 {
			fmt.Fprintf(w, "\nload unknown (no report within 3 intervals): %s\n", strings.Join(out.LoadUnknown, ", "))
		}
		if line := hotSpotLine(out.HotSpots); line != "" {
			fmt.Fprintf(w, "\n%s\n", line)
		}
		if line := orphanLine(out.OrphanBytes); line != "" {
			fmt.Fprintf(w, "\n%s\n", line)
		}
		if len(out.SelfFenced) > 0 {
			fmt.Fprintf(w, "\nno lease, serving none of their slots (self-fenced: cut off from slotd, stopped, or not registered): %s\n",
				strings.Join(out.SelfFenced, ", "))
		}
		fmt.Fprintf(w, "\n%s\n", balancerLine(auto, autoErr))
		if p := out.ActivePlan.Plan; p != nil {
			fmt.Fprintf(w, "\n%s\n", planProgressLine(p))
		} else {
			fmt.Fprintln(w, "\nno plan applying")
		}
		if len(out.InFlight) > 0 {
			fmt.Fprintln(w)
			t := newTable(w, "SLOT", "FROM", "TO", "PHASE", "COPIED", "PLAN")
			for _, m := range out.InFlight {
				t.row(m.Slot, m.From, m.To, m.Phase, formatBytes(m.BytesCopied), orDash(m.PlanID))
			}
			return t.flush()
		}
		return nil
	})
}

// planProgressLine is one line about a plan: state, moves and bytes done.
func planProgressLine(p *slotdv1.Plan) string {
	pr := p.GetProgress()
	var b strings.Builder
	fmt.Fprintf(&b, "plan %s %s: %d/%d moves done", p.GetId(), planState(p.GetState()), pr.GetDone()+pr.GetSkipped(), pr.GetMoves())
	if pr.GetSkipped() > 0 {
		fmt.Fprintf(&b, " (%d skipped)", pr.GetSkipped())
	}
	if pr.GetFailed() > 0 {
		fmt.Fprintf(&b, ", %d failed", pr.GetFailed())
	}
	if pr.GetAborted() > 0 {
		fmt.Fprintf(&b, ", %d aborted", pr.GetAborted())
	}
	if c := pr.GetBytesCopied(); c > 0 {
		fmt.Fprintf(&b, ", %s copied", formatBytes(c))
	}
	fmt.Fprintf(&b, ", ~%s of ~%s estimated", formatBytes(pr.GetBytesDone()), formatBytes(pr.GetBytes()))
	if e := p.GetError(); e != "" {
		fmt.Fprintf(&b, "; error: %s", e)
	}
	return b.String()
}

// orphanLine says which nodes still hold data nothing explains, "" when
// none: "left copies to clean up: n2 1.2 MiB, n3 40 KiB".
func orphanLine(orphans map[string]int64) string {
	if len(orphans) == 0 {
		return ""
	}
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(orphans)) {
		parts = append(parts, id+" "+formatBytes(uint64(orphans[id])))
	}
	return "left copies to clean up (reconciliation drops them): " + strings.Join(parts, ", ")
}
