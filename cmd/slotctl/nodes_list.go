package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/clusterstatus"
	"github.com/slotd/slotd/load"
)

func init() { registerNodes(newNodesListCmd) }

// nodesListJSON is `slotctl nodes list -o json`:
//
//	{"version": 12,
//	 "nodes": [{"id": "n1", "address": "127.0.0.1:7501", "zone": "", "weight": 1,
//	            "state": "active", "slots": 5461,
//	            "replicas": {"primaries": 5461, "followers": 10923, "learners": 0},
//	            "last_heartbeat": "2026-01-02T03:04:05.123Z", "hold_down_until": "",
//	            "lease_granted": "2026-01-02T03:00:00Z", "lease_expires": "2026-01-02T03:04:14Z",
//	            "self_fenced": false}]}
//
// Times are RFC 3339 in UTC, "" when unset. Nodes are sorted by id.
// replicas counts the slots the node is primary of, an in-sync follower of
// and a learner of (being filled), from Admin.Status; null before the
// bootstrap.
type nodesListJSON struct {
	Version uint64         `json:"version"`
	Nodes   []nodeInfoJSON `json:"nodes"`
}

type nodeInfoJSON struct {
	nodeJSON
	Slots         uint32                      `json:"slots"`
	Replicas      *clusterstatus.NodeReplicas `json:"replicas"`
	LastHeartbeat string                      `json:"last_heartbeat"`
	HoldDownUntil string                      `json:"hold_down_until"`
	leaseJSON
}

// leaseJSON is a store's lease from slotd: when it was granted (the last
// registration), when the store stops serving unless it renews, and
// whether it serves nothing now for want of one (self_fenced: no live
// lease, so the store has stopped serving or never registered).
type leaseJSON struct {
	LeaseGranted string `json:"lease_granted"`
	LeaseExpires string `json:"lease_expires"`
	SelfFenced   bool   `json:"self_fenced"`
}

func leaseOf(n *slotdv1.NodeInfo) leaseJSON {
	return leaseJSON{LeaseGranted: timeJSON(n.GetLeaseGranted()), LeaseExpires: timeJSON(n.GetLeaseExpires()), SelfFenced: n.GetLeaseExpires() == nil}
}

// leaseText is the LEASE column: "until 2026-01-02T03:04:14Z" or "none:
// self-fenced".
func leaseText(n *slotdv1.NodeInfo) string {
	if n.GetLeaseExpires() == nil {
		return "none: self-fenced"
	}
	return "until " + formatTime(n.GetLeaseExpires())
}

func newNodesListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the registered nodes with their state, slots, primaries and replicas, last heartbeat and lease",
		Example: "  slotctl nodes list\n  slotctl nodes list -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				resp, err := c.dir.ListNodes(cctx, &slotdv1.ListNodesRequest{})
				if err != nil {
					return err
				}
				// What each node holds comes with the status, the one model
				// of it that status and the console show.
				st, err := c.admin.Status(cctx, &slotdv1.StatusRequest{})
				if err != nil {
					return err
				}
				held := map[string]*clusterstatus.NodeReplicas{}
				for _, n := range clusterstatus.Build(st, nil, load.View{}).Nodes {
					held[n.ID] = n.Replicas
				}
				infos := slices.Clone(resp.GetNodes())
				slices.SortFunc(infos, func(a, b *slotdv1.NodeInfo) int { return strings.Compare(a.GetNode().GetId(), b.GetNode().GetId()) })
				out := nodesListJSON{Version: resp.GetVersion(), Nodes: []nodeInfoJSON{}}
				for _, n := range infos {
					out.Nodes = append(out.Nodes, nodeInfoJSON{
						nodeJSON: nodeOf(n.GetNode()), Slots: n.GetSlots(), Replicas: held[n.GetNode().GetId()],
						LastHeartbeat: timeJSON(n.GetLastHeartbeat()), HoldDownUntil: timeJSON(n.GetHoldDownUntil()),
						leaseJSON: leaseOf(n),
					})
				}
				return g.print(out, func(w io.Writer) error {
					t := newTable(w, "NODE", "ADDRESS", "ZONE", "WEIGHT", "STATE", "SLOTS", "PRIMARIES", "FOLLOWERS", "LEARNERS", "LAST HEARTBEAT", "LEASE", "HELD DOWN UNTIL")
					for i, n := range out.Nodes {
						p, f, l := "-", "-", "-"
						if r := n.Replicas; r != nil {
							p, f, l = fmt.Sprint(r.Primaries), fmt.Sprint(r.Followers), fmt.Sprint(r.Learners)
						}
						t.row(n.ID, n.Address, orDash(n.Zone), n.Weight, n.State, n.Slots, p, f, l,
							formatTime(infos[i].GetLastHeartbeat()), leaseText(infos[i]), formatTime(infos[i].GetHoldDownUntil()))
					}
					return t.flush()
				})
			})
		},
	}
}
