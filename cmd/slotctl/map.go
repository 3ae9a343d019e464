package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/slots"
)

func init() { register(newMapCmd) }

// mapJSON is `slotctl map -o json`: every node with the slot ranges it owns
// (range notation "from-to" or "slot", ascending), and the moves in flight.
//
//	{"version": 12, "cluster_id": "...",
//	 "nodes": [{"id": "n1", "address": "127.0.0.1:7501", "zone": "", "weight": 1,
//	            "state": "active", "slots": 5461, "ranges": ["0-120", "400-987"]}],
//	 "migrations": [{"slot": 17, "from": "n1", "to": "n4", "phase": "copying", "move_id": "..."}]}
//
// With --node, nodes holds that node only.
type mapJSON struct {
	Version    uint64          `json:"version"`
	ClusterID  string          `json:"cluster_id"`
	Nodes      []mapNodeJSON   `json:"nodes"`
	Migrations []migrationJSON `json:"migrations"`
}

type mapNodeJSON struct {
	ID      string   `json:"id"`
	Address string   `json:"address"`
	Zone    string   `json:"zone"`
	Weight  uint32   `json:"weight"`
	State   string   `json:"state"`
	Slots   int      `json:"slots"`
	Ranges  []string `json:"ranges"`
}

type migrationJSON struct {
	Slot   int    `json:"slot"`
	From   string `json:"from"`
	To     string `json:"to"`
	Phase  string `json:"phase"`
	MoveID string `json:"move_id"`
}

type mapOptions struct {
	node            string
	summary         bool
	replicas        bool
	underReplicated bool
}

func newMapCmd(g *globals) *cobra.Command {
	var o mapOptions
	cmd := &cobra.Command{
		Use:   "map",
		Short: "Show which node owns which slot ranges (like Redis' CLUSTER SLOTS), or with --replicas each range's replicas",
		Example: `  slotctl map
  slotctl map --node n1
  slotctl map --summary
  slotctl map --replicas
  slotctl map --replicas --node n1 --under-replicated
  slotctl map -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.underReplicated && !o.replicas {
				return usageError{errors.New("--under-replicated lists replica sets: add --replicas")}
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				if o.replicas {
					resp, err := c.admin.ListReplicaSets(cctx, &slotdv1.ListReplicaSetsRequest{NodeId: o.node, UnderReplicatedOnly: o.underReplicated})
					if err != nil {
						return err
					}
					return g.printMapReplicas(resp)
				}
				resp, err := c.dir.GetMap(cctx, &slotdv1.GetMapRequest{})
				if err != nil {
					return err
				}
				m, err := slotmap.FromProto(resp.GetMap())
				if err != nil {
					return fmt.Errorf("slotd sent a map slotctl cannot read: %w", err)
				}
				if o.summary {
					return g.printMapSummary(m)
				}
				return g.printMap(m, o.node)
			})
		},
	}
	cmd.Flags().StringVar(&o.node, "node", "", "show only this node's slots")
	cmd.Flags().BoolVar(&o.summary, "summary", false, "one line per node: slots, share, number of ranges")
	cmd.Flags().BoolVar(&o.replicas, "replicas", false, "each range's replicas: primary, in-sync replicas (ISR), learners, zones")
	cmd.Flags().BoolVar(&o.underReplicated, "under-replicated", false, "with --replicas: only the ranges with fewer in-sync replicas than rf")
	cmd.MarkFlagsMutuallyExclusive("node", "summary")
	cmd.MarkFlagsMutuallyExclusive("replicas", "summary")
	return cmd
}

// mapView summarizes a map for printing; only, if set, keeps one node.
func mapView(m *slotmap.Map, only string) (mapJSON, error) {
	out := mapJSON{Version: m.Version(), ClusterID: m.ClusterID(), Nodes: []mapNodeJSON{}, Migrations: []migrationJSON{}}
	found := false
	for _, n := range m.Nodes() {
		if only != "" && n.ID != only {
			continue
		}
		found = true
		set := m.SlotsOf(n.ID)
		mn := mapNodeJSON{ID: n.ID, Address: n.Addr, Zone: n.Zone, Weight: n.Weight, State: nodeState(n.State), Slots: set.Count(), Ranges: []string{}}
		for _, r := range set.Ranges() {
			mn.Ranges = append(mn.Ranges, r.String())
		}
		out.Nodes = append(out.Nodes, mn)
	}
	if only != "" && !found {
		return out, fmt.Errorf("node %q is not in the map at version %d; list nodes with slotctl nodes list", only, m.Version())
	}
	for _, mg := range m.Migrations() {
		if only != "" && mg.From != only && mg.To != only {
			continue
		}
		out.Migrations = append(out.Migrations, migrationJSON{Slot: mg.Slot.Int(), From: mg.From, To: mg.To, Phase: movePhase(mg.Phase), MoveID: mg.MoveID})
	}
	return out, nil
}

func (g *globals) printMap(m *slotmap.Map, only string) error {
	out, err := mapView(m, only)
	if err != nil {
		return err
	}
	return g.print(out, func(w io.Writer) error {
		if m.Empty() {
			fmt.Fprintf(w, "version %d: not bootstrapped, no slot has an owner; bootstrap with slotctl init\n", out.Version)
			return nil
		}
		fmt.Fprintf(w, "version %d, %d nodes\n\n", out.Version, len(m.Nodes()))
		// One row per run of consecutive slots with one owner, in slot order.
		t := newTable(w, "SLOTS", "COUNT", "NODE", "ADDRESS")
		for s := 0; s < slots.Count; {
			owner := m.OwnerID(slots.MustNew(s))
			e := s
			for e+1 < slots.Count && m.OwnerID(slots.MustNew(e+1)) == owner {
				e++
			}
			if only == "" || owner == only {
				r := slots.Range{From: slots.MustNew(s), To: slots.MustNew(e)}
				addr := ""
				if n, ok := m.Node(owner); ok {
					addr = n.Addr
				}
				t.row(r.String(), e-s+1, owner, addr)
			}
			s = e + 1
		}
		if err := t.flush(); err != nil {
			return err
		}
		if len(out.Migrations) > 0 {
			fmt.Fprintln(w)
			t := newTable(w, "MIGRATING", "FROM", "TO", "PHASE")
			for _, mg := range out.Migrations {
				t.row(mg.Slot, mg.From, mg.To, mg.Phase)
			}
			return t.flush()
		}
		return nil
	})
}
