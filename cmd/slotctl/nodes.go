package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newNodesCmd) }

// nodeCommands is filled by each `slotctl nodes VERB` file in init.
var nodeCommands []func(*globals) *cobra.Command

func registerNodes(f func(*globals) *cobra.Command) { nodeCommands = append(nodeCommands, f) }

func newNodesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "List, add, re-address, drain, undrain, remove and reweight store nodes",
		Example: `  slotctl nodes list
  slotctl nodes drain n3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("say what to do: slotctl nodes list|add|set-addr|drain|undrain|remove|weight (see slotctl nodes --help)")
		},
	}
	for _, add := range nodeCommands {
		cmd.AddCommand(add(g))
	}
	return cmd
}

// nodeJSON is a node as the node commands print it.
type nodeJSON struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Zone    string `json:"zone"`
	Weight  uint32 `json:"weight"`
	State   string `json:"state"`
}

func nodeOf(n *slotdv1.Node) nodeJSON {
	return nodeJSON{ID: n.GetId(), Address: n.GetAddress(), Zone: n.GetZone(), Weight: n.GetWeight(), State: nodeState(n.GetState())}
}

// nodeChangeJSON is `slotctl nodes add|drain|weight -o json`: the node as it
// is after the change and the directory version of the change.
//
//	{"version": 13, "node": {"id": "n4", "address": "127.0.0.1:7504", "zone": "",
//	                         "weight": 1, "state": "active"}}
type nodeChangeJSON struct {
	Version uint64   `json:"version"`
	Node    nodeJSON `json:"node"`
}

// printNodeChange prints a changed node; next says what the operator
// probably does next.
func (g *globals) printNodeChange(what string, n *slotdv1.Node, version uint64, next string) error {
	out := nodeChangeJSON{Version: version, Node: nodeOf(n)}
	return g.print(out, func(w io.Writer) error {
		fmt.Fprintf(w, "%s node %s (%s, weight %d, %s) at version %d\n", what, out.Node.ID, out.Node.Address, out.Node.Weight, out.Node.State, version)
		if next != "" {
			fmt.Fprintln(w, next)
		}
		return nil
	})
}
