package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
)

func init() { register(newInitCmd) }

// `slotctl init -o json` prints the new map in the form of `slotctl map -o
// json` (mapJSON).
type initOptions struct {
	nodes      []string
	vnodes     uint32
	rf, minISR uint32
}

func newInitCmd(g *globals) *cobra.Command {
	var o initOptions
	cmd := &cobra.Command{
		Use:   "init [--node ID=ADDR[,zone=Z][,weight=W] ...]",
		Short: "Bootstrap the directory: assign every slot from a vnode ring over the nodes",
		Long: `init assigns all 16,384 slots for the first time, from a vnode consistent-hash
ring over the given nodes: the same nodes always give the same map. Without
--node it takes every active node that registered itself with slotd (store
nodes register at start), and refuses (exit 3) when none has. It refuses
(exit 3) a cluster that is already bootstrapped; change a running cluster with
slotctl plan and slotctl apply.

--rf N bootstraps every slot with N replicas in distinct zones (the ring's
replica walk), its owner the primary: every node needs a zone, in at least N
zones. --min-isr (default: half of rf, rounded up) is the fewest in-sync
replicas a slot may go down to. Without --rf, init keeps the cluster's
replication policy (slotctl replication show).`,
		Example: `  slotctl init
  slotctl init --node n1=127.0.0.1:7501 --node n2=127.0.0.1:7502 --node n3=127.0.0.1:7503
  slotctl init --node n1=127.0.0.1:7501,zone=a,weight=2 --node n2=127.0.0.1:7502,zone=b --vnodes 128
  slotctl init --rf 3 --min-isr 2 --node n1=127.0.0.1:7501,zone=a --node n2=127.0.0.1:7502,zone=b --node n3=127.0.0.1:7503,zone=c`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &slotdv1.BootstrapRequest{Vnodes: o.vnodes, Operator: g.operator}
			flags := cmd.Flags()
			if flags.Changed("min-isr") && !flags.Changed("rf") {
				return usagef("--min-isr needs --rf")
			}
			if flags.Changed("rf") {
				if !flags.Changed("min-isr") {
					o.minISR = (o.rf + 1) / 2
				}
				req.Replication = &slotdv1.ReplicationPolicy{Rf: o.rf, MinIsr: o.minISR}
			}
			seen := map[string]bool{}
			for _, s := range o.nodes {
				n, err := parseNodeSpec(s)
				if err != nil {
					return err
				}
				if seen[n.Id] {
					return usagef("node %s is given twice", n.Id)
				}
				seen[n.Id] = true
				req.Nodes = append(req.Nodes, &slotdv1.Node{Id: n.Id, Address: n.Address, Zone: n.Zone, Weight: n.Weight})
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				from := "given"
				if len(req.Nodes) == 0 {
					nodes, err := g.registeredNodes(ctx, c)
					if err != nil {
						return err
					}
					req.Nodes, from = nodes, "registered"
				}
				cctx, cancel := g.call(ctx)
				defer cancel()
				resp, err := c.admin.Bootstrap(cctx, req)
				if err != nil {
					return err
				}
				m, err := slotmap.FromProto(resp.GetMap())
				if err != nil {
					return fmt.Errorf("bootstrapped, but slotd sent a map slotctl cannot read: %w", err)
				}
				out, err := mapView(m, "")
				if err != nil {
					return err
				}
				return g.print(out, func(w io.Writer) error {
					fmt.Fprintf(w, "bootstrapped at version %d over the %d %s nodes\n", out.Version, len(req.Nodes), from)
					if r := req.GetReplication(); r.GetRf() > 1 {
						fmt.Fprintf(w, "every slot on %d replicas in distinct zones, min isr %d\n", r.GetRf(), r.GetMinIsr())
					}
					fmt.Fprintln(w)
					t := newTable(w, "NODE", "ADDRESS", "ZONE", "WEIGHT", "SLOTS", "RANGES")
					for _, n := range out.Nodes {
						t.row(n.ID, n.Address, orDash(n.Zone), n.Weight, n.Slots, len(n.Ranges))
					}
					return t.flush()
				})
			})
		},
	}
	cmd.Flags().StringArrayVar(&o.nodes, "node", nil, "an initial node, ID=HOST:PORT[,zone=Z][,weight=W]; repeat for each node (default: every active registered node)")
	cmd.Flags().Uint32Var(&o.vnodes, "vnodes", 0, "virtual nodes per unit of weight on the ring (0: slotd's default)")
	cmd.Flags().Uint32Var(&o.rf, "rf", 1, "replicas of each slot, each in its own zone (1-5; default: the cluster's policy)")
	cmd.Flags().Uint32Var(&o.minISR, "min-isr", 1, "fewest in-sync replicas a slot may go down to (1-rf; default: half of rf, rounded up)")
	return cmd
}

// registeredNodes returns the active nodes that registered with slotd, for
// an init without --node; refusedError when there are none.
func (g *globals) registeredNodes(ctx context.Context, c *conn) ([]*slotdv1.Node, error) {
	cctx, cancel := g.call(ctx)
	defer cancel()
	resp, err := c.dir.ListNodes(cctx, &slotdv1.ListNodesRequest{})
	if err != nil {
		return nil, err
	}
	var out []*slotdv1.Node
	var skipped []string
	for _, ni := range resp.GetNodes() {
		n := ni.GetNode()
		if n.GetState() != slotdv1.NodeState_NODE_STATE_ACTIVE {
			skipped = append(skipped, n.GetId()+" ("+nodeState(n.GetState())+")")
			continue
		}
		out = append(out, &slotdv1.Node{Id: n.GetId(), Address: n.GetAddress(), Zone: n.GetZone(), Weight: n.GetWeight()})
	}
	if len(out) == 0 {
		msg := "no active store node has registered with slotd yet; start the nodes (they register themselves) or give --node ID=HOST:PORT"
		if len(skipped) > 0 {
			msg += "; not active: " + strings.Join(skipped, ", ")
		}
		return nil, refusedError{errors.New(msg)}
	}
	return out, nil
}
