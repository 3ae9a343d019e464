package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/load"
)

func init() { register(newStatusCmd) }

// statusJSON is `slotctl status -o json`:
//
//	{"version": 12, "server": "slotd-1", "mover_leader": "slotd-1",
//	 "throttle_bytes_per_second": 50000000,
//	 "nodes": [{"id": "n1", "address": "127.0.0.1:7501", "zone": "", "weight": 1,
//	            "state": "active", "slots": 5462, "target_slots": 5461, "load": 1.0002,
//	            "measured": <measuredJSON> or null}],
//	 "load_unknown": ["n3"], "hot_spots": [<hotSpotJSON>],
//	 "in_flight": [{"plan_id": "...", "move_id": "...", "slot": 17, "from": "n1", "to": "n4",
//	                "phase": "copying", "bytes_copied": 1024, "started_at": "2026-01-02T03:04:05Z"}],
//	 "active_plan": <plan, see planJSON> or null,
//	 "balancer": <autoJSON, as slotctl auto status -o json> or null}
//
// Node states: active, draining, down. load is slots/target_slots, the
// SLOT RATIO column (1 is balanced; 0 when the node should own nothing);
// measured is the node's measured load and its ratios (see measuredJSON),
// null while unknown (no report within three of its intervals), and then
// the node is in load_unknown. balancer is null when the balancer's status
// could not be read (an older slotd, or the call was refused).
type statusJSON struct {
	Version     uint64          `json:"version"`
	Server      string          `json:"server"`
	MoverLeader string          `json:"mover_leader"`
	Throttle    uint64          `json:"throttle_bytes_per_second"`
	Nodes       []nodeLoadJSON  `json:"nodes"`
	InFlight    []moveJSON      `json:"in_flight"`
	ActivePlan  json.RawMessage `json:"active_plan"`
	// OrphanBytes is, per node that reported any, the bytes it holds that
	// nothing in the directory explains (left copies its reconciliation
	// is dropping or waiting out the grace for). Omitted when none.
	OrphanBytes map[string]int64 `json:"orphan_bytes,omitempty"`
	// SelfFenced names the nodes without a live lease: they serve none of
	// their slots (cut off from slotd, stopped, or not registered yet).
	// Omitted when none.
	SelfFenced []string `json:"self_fenced,omitempty"`
	// LoadUnknown names the nodes whose load is unknown; HotSpots the
	// slots moving cannot fix. Both empty against a slotd without load.
	LoadUnknown []string      `json:"load_unknown"`
	HotSpots    []hotSpotJSON `json:"hot_spots"`
	// Balancer is what `slotctl auto status -o json` prints, null when
	// that call failed.
	Balancer *autoJSON `json:"balancer"`
}

type nodeLoadJSON struct {
	ID          string  `json:"id"`
	Address     string  `json:"address"`
	Zone        string  `json:"zone"`
	Weight      uint32  `json:"weight"`
	State       string  `json:"state"`
	Slots       uint32  `json:"slots"`
	TargetSlots uint32  `json:"target_slots"`
	Load        float64 `json:"load"`
	// Measured is null while the node's load is unknown.
	Measured *measuredJSON `json:"measured"`
}

type moveJSON struct {
	PlanID      string `json:"plan_id"`
	MoveID      string `json:"move_id"`
	Slot        uint32 `json:"slot"`
	From        string `json:"from"`
	To          string `json:"to"`
	Phase       string `json:"phase"`
	BytesCopied uint64 `json:"bytes_copied"`
	StartedAt   string `json:"started_at"`
}

func newStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the directory version, nodes and their load, moves in flight, the active plan, the balancer, the throttle",
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
	out := statusJSON{
		Version: st.GetVersion(), Server: st.GetServer(), MoverLeader: st.GetMoverLeader(),
		Throttle: st.GetThrottle().GetDefaultBytesPerSecond(), Nodes: []nodeLoadJSON{}, InFlight: []moveJSON{},
		LoadUnknown: unknownOf(lv), HotSpots: hotSpotsOf(lv), Balancer: auto,
	}
	for _, n := range infos {
		id := n.GetNode().GetId()
		if b := n.GetOrphanBytes(); b > 0 {
			if out.OrphanBytes == nil {
				out.OrphanBytes = map[string]int64{}
			}
			out.OrphanBytes[id] = b
		}
		if n.GetLeaseExpires() == nil {
			out.SelfFenced = append(out.SelfFenced, id)
		}
	}
	slices.Sort(out.SelfFenced)
	measured := map[string]*measuredJSON{}
	for _, n := range lv.Nodes {
		measured[n.ID] = measuredOf(n)
	}
	nodes := slices.Clone(st.GetNodes())
	slices.SortFunc(nodes, func(a, b *slotdv1.NodeLoad) int { return strings.Compare(a.GetNode().GetId(), b.GetNode().GetId()) })
	for _, n := range nodes {
		out.Nodes = append(out.Nodes, nodeLoadJSON{
			ID: n.GetNode().GetId(), Address: n.GetNode().GetAddress(), Zone: n.GetNode().GetZone(),
			Weight: n.GetNode().GetWeight(), State: nodeState(n.GetNode().GetState()),
			Slots: n.GetSlots(), TargetSlots: n.GetTargetSlots(), Load: n.GetLoad(),
			Measured: measured[n.GetNode().GetId()],
		})
	}
	for _, m := range st.GetInFlight() {
		out.InFlight = append(out.InFlight, moveJSON{
			PlanID: m.GetPlanId(), MoveID: m.GetId(), Slot: m.GetSlot(), From: m.GetFrom(), To: m.GetTo(),
			Phase: movePhase(m.GetPhase()), BytesCopied: m.GetBytesCopied(), StartedAt: timeJSON(m.GetStartedAt()),
		})
	}
	var err error
	if out.ActivePlan, err = planJSON(st.GetActivePlan()); err != nil {
		return err
	}
	return g.print(out, func(w io.Writer) error {
		fmt.Fprintf(w, "version %d, server %s, mover leader %s, throttle %s\n\n",
			out.Version, orDash(out.Server), orDash(out.MoverLeader), formatRate(out.Throttle))
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
		if p := st.GetActivePlan(); p != nil {
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
