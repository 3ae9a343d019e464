package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newReplicationCmd) }

// replicationJSON is `slotctl replication show|set -o json`:
//
//	{"rf": 3, "min_isr": 2, "version": 42, "bootstrapped": true,
//	 "zones": ["a", "b", "c"], "nodes_without_zone": [],
//	 "under_replicated": 0, "below_min_isr": 0, "with_learners": 0}
//
// set prints the same object after the change, with "changed".
type replicationJSON struct {
	RF               uint32   `json:"rf"`
	MinISR           uint32   `json:"min_isr"`
	Version          uint64   `json:"version"`
	Bootstrapped     bool     `json:"bootstrapped"`
	Zones            []string `json:"zones"`
	NodesWithoutZone []string `json:"nodes_without_zone"`
	UnderReplicated  uint32   `json:"under_replicated"`
	BelowMinISR      uint32   `json:"below_min_isr"`
	WithLearners     uint32   `json:"with_learners"`
	Changed          *bool    `json:"changed,omitempty"`
}

func replicationOf(r *slotdv1.GetReplicationResponse) replicationJSON {
	return replicationJSON{
		RF: r.GetPolicy().GetRf(), MinISR: r.GetPolicy().GetMinIsr(), Version: r.GetVersion(), Bootstrapped: r.GetBootstrapped(),
		Zones: orEmpty(r.GetZones()), NodesWithoutZone: orEmpty(r.GetNodesWithoutZone()),
		UnderReplicated: r.GetUnderReplicated(), BelowMinISR: r.GetBelowMinIsr(), WithLearners: r.GetWithLearners(),
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (r replicationJSON) table(w io.Writer) error {
	t := newTable(w)
	if r.Changed != nil && !*r.Changed {
		t.row("changed", "no: the policy was already this")
	}
	t.row("rf", r.RF)
	t.row("min isr", r.MinISR)
	t.row("version", r.Version)
	t.row("zones", fmt.Sprintf("%d: %s", len(r.Zones), orDash(strings.Join(r.Zones, ", "))))
	if len(r.NodesWithoutZone) > 0 {
		t.row("without zone", strings.Join(r.NodesWithoutZone, ", "))
	}
	if !r.Bootstrapped {
		t.row("slots", "not bootstrapped yet")
		return t.flush()
	}
	t.row("under-replicated", fmt.Sprintf("%d slots", r.UnderReplicated))
	t.row("below min isr", fmt.Sprintf("%d slots", r.BelowMinISR))
	t.row("filling", fmt.Sprintf("%d slots with learners", r.WithLearners))
	return t.flush()
}

func newReplicationCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replication",
		Short: "The replication policy: show, set rf=N min-isr=M",
		Long: `Every slot keeps rf replicas, each in its own zone: a primary that serves it
and in-sync replicas (ISR) that hold every acknowledged write. min-isr is the
fewest in-sync replicas a slot may go down to. rf is 1-5 and at most the
number of zones with active nodes; min-isr is 1-rf and at most every slot's
ISR. With rf above 1 every active node needs a zone.

Not built yet: raising or lowering rf on a running cluster adds or removes
replicas, a planned, throttled operation of the mover that does not exist
yet. Until it does, set changes rf only before the cluster is bootstrapped
(or bootstrap at the rf you want: slotctl init --rf 3 --min-isr 2), or when
every slot already has that many replicas; otherwise it refuses (exit 3)
and changes nothing. min-isr can change at any time within those bounds.`,
		Example: `  slotctl replication show
  slotctl replication show -o json
  slotctl replication set min-isr=2 --reason "ack on two zones"
  slotctl replication set rf=3 min-isr=2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("say what to do: slotctl replication show|set KEY=VALUE... (see slotctl replication --help)")
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use: "show", Short: "Show rf, min-isr, the zones and how the slots' replicas stand", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				out, err := readReplication(ctx, g, c)
				if err != nil {
					return err
				}
				return g.print(out, out.table)
			})
		},
	})
	var reason string
	set := &cobra.Command{
		Use: "set KEY=VALUE...", Short: "Change rf and min-isr (keys: rf, min-isr; see slotctl replication --help)",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := parseReplicationSet(args)
			if err != nil {
				return err
			}
			req.Reason, req.Operator = reason, g.operator
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				r, err := c.admin.SetReplication(cctx, req)
				if err != nil {
					return err
				}
				out, err := readReplication(ctx, g, c)
				if err != nil {
					return err
				}
				changed := r.GetChanged()
				out.Changed = &changed
				return g.print(out, out.table)
			})
		},
	}
	set.Flags().StringVar(&reason, "reason", "", "why, recorded in history and the audit log")
	cmd.AddCommand(set)
	return cmd
}

func readReplication(ctx context.Context, g *globals, c *conn) (replicationJSON, error) {
	cctx, cancel := g.call(ctx)
	defer cancel()
	r, err := c.admin.GetReplication(cctx, &slotdv1.GetReplicationRequest{})
	if err != nil {
		return replicationJSON{}, err
	}
	return replicationOf(r), nil
}

// parseReplicationSet reads `slotctl replication set` arguments. Values
// are checked by slotd, which knows the zones and the sets.
func parseReplicationSet(args []string) (*slotdv1.SetReplicationRequest, error) {
	r := &slotdv1.SetReplicationRequest{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || v == "" {
			return nil, usagef("%q: give KEY=VALUE (keys: rf, min-isr)", a)
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return nil, usagef("%s=%q: give a number", k, v)
		}
		u := uint32(n)
		switch strings.ReplaceAll(k, "_", "-") {
		case "rf":
			r.Rf = &u
		case "min-isr":
			r.MinIsr = &u
		default:
			return nil, usagef("unknown key %q (keys: rf, min-isr)", k)
		}
	}
	return r, nil
}
