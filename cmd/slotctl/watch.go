package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/slots"
)

func init() { register(newWatchCmd) }

// watchJSON is one line of `slotctl watch -o json` (JSON lines, one object
// per map version as it arrives):
//
//	{"version": 13, "from_version": 12, "full": false,
//	 "slots": [{"slot": 17, "from": "n1", "to": "n4"}],
//	 "nodes": [{"id": "n4", "address": "127.0.0.1:7504", "zone": "", "weight": 1, "state": "active"}],
//	 "removed_nodes": [], "migrations": [{"slot": 18, "from": "n1", "to": "n4", "phase": "copying", "move_id": "..."}]}
//
// The first line is the full map (full true, from_version 0, every node,
// no slots). After a reconnect slotd may send a full map again; slots then
// lists what changed since the last version seen. nodes holds the nodes
// added or changed; migrations is the complete set of moves in flight.
type watchJSON struct {
	Version      uint64          `json:"version"`
	FromVersion  uint64          `json:"from_version"`
	Full         bool            `json:"full"`
	Slots        []slotMoveJSON  `json:"slots"`
	Nodes        []nodeJSON      `json:"nodes"`
	RemovedNodes []string        `json:"removed_nodes"`
	Migrations   []migrationJSON `json:"migrations"`
}

type slotMoveJSON struct {
	Slot int    `json:"slot"`
	From string `json:"from"`
	To   string `json:"to"`
}

type watchOptions struct{ count int }

func newWatchCmd(g *globals) *cobra.Command {
	var o watchOptions
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print map changes as they happen, until Ctrl-C",
		Long: `watch follows slotd's map stream and prints one line per directory version:
slots that changed owner, nodes added, changed or removed, moves in flight. It
reconnects (from the last version seen) when slotd goes away, and ends with
Ctrl-C (exit 0) or after --count versions.`,
		Example: `  slotctl watch
  slotctl watch -o json --count 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.count < 0 {
				return usagef("--count must not be negative")
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				err := g.watch(ctx, c, o.count)
				if ctx.Err() != nil {
					return nil // Ctrl-C is how watch ends
				}
				return err
			})
		},
	}
	cmd.Flags().IntVar(&o.count, "count", 0, "stop after this many versions (0: until Ctrl-C)")
	return cmd
}

func (g *globals) watch(ctx context.Context, c *conn, count int) error {
	var cur *slotmap.Map
	seen := 0
	backoff := 100 * time.Millisecond
	for {
		var known uint64
		if cur != nil {
			known = cur.Version()
		}
		stream, err := c.dir.WatchMap(ctx, &slotdv1.WatchMapRequest{KnownVersion: known})
		for err == nil {
			var resp *slotdv1.WatchMapResponse
			if resp, err = stream.Recv(); err != nil {
				break
			}
			backoff = 100 * time.Millisecond
			var ev watchJSON
			if cur, ev, err = applyWatch(cur, resp); err != nil {
				return err
			}
			if err = g.printWatch(ev); err != nil {
				return err
			}
			if seen++; count > 0 && seen >= count {
				return nil
			}
		}
		if ctx.Err() != nil || status.Code(err) != codes.Unavailable && !errors.Is(err, io.EOF) {
			return err
		}
		fmt.Fprintf(g.stderr, "slotctl: lost the map stream (%s); reconnecting\n", oneLine(fromRPC(err, g).Error()))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// applyWatch applies one stream message to cur and describes the change.
func applyWatch(cur *slotmap.Map, resp *slotdv1.WatchMapResponse) (*slotmap.Map, watchJSON, error) {
	ev := watchJSON{Slots: []slotMoveJSON{}, Nodes: []nodeJSON{}, RemovedNodes: []string{}, Migrations: []migrationJSON{}}
	var next *slotmap.Map
	var err error
	switch u := resp.GetUpdate().(type) {
	case *slotdv1.WatchMapResponse_Full:
		if next, err = slotmap.FromProto(u.Full); err != nil {
			return nil, ev, fmt.Errorf("slotd sent a map slotctl cannot read: %w", err)
		}
		ev.Full = true
		if cur == nil {
			for _, n := range next.Nodes() {
				ev.Nodes = append(ev.Nodes, nodeJSON{ID: n.ID, Address: n.Addr, Zone: n.Zone, Weight: n.Weight, State: nodeState(n.State)})
			}
			break
		}
		// A full map after a gap: show what changed since the last version.
		ev.FromVersion = cur.Version()
		describeDelta(&ev, cur, slotmap.Diff(cur, next))
	case *slotdv1.WatchMapResponse_Delta:
		if cur == nil {
			return nil, ev, errors.New("slotd sent a delta before any full map; retry")
		}
		if next, err = cur.Apply(u.Delta); err != nil {
			return nil, ev, fmt.Errorf("slotd sent a delta slotctl cannot apply: %w", err)
		}
		ev.FromVersion = u.Delta.GetFromVersion()
		describeDelta(&ev, cur, u.Delta)
	default:
		return cur, ev, errors.New("slotd sent an empty watch message")
	}
	ev.Version = next.Version()
	for _, mg := range next.Migrations() {
		ev.Migrations = append(ev.Migrations, migrationJSON{Slot: mg.Slot.Int(), From: mg.From, To: mg.To, Phase: movePhase(mg.Phase), MoveID: mg.MoveID})
	}
	return next, ev, nil
}

func describeDelta(ev *watchJSON, prev *slotmap.Map, d *slotdv1.MapDelta) {
	for _, s := range d.GetSlots() {
		sl := slots.MustNew(int(s.GetSlot()))
		ev.Slots = append(ev.Slots, slotMoveJSON{Slot: sl.Int(), From: prev.OwnerID(sl), To: s.GetOwner()})
	}
	slices.SortFunc(ev.Slots, func(a, b slotMoveJSON) int { return a.Slot - b.Slot })
	for _, n := range d.GetNodes() {
		ev.Nodes = append(ev.Nodes, nodeOf(n))
	}
	ev.RemovedNodes = append(ev.RemovedNodes, d.GetRemovedNodes()...)
}

func (g *globals) printWatch(ev watchJSON) error {
	if g.output == "json" {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(g.stdout, "%s\n", b)
		return err
	}
	var parts []string
	if ev.Full && ev.FromVersion == 0 {
		parts = append(parts, fmt.Sprintf("full map, %d nodes", len(ev.Nodes)))
	} else {
		// Group slot changes by source and target: "slots 17-20 n1->n4".
		type pair struct{ from, to string }
		sets := map[pair]*slots.Set{}
		var order []pair
		for _, s := range ev.Slots {
			p := pair{s.From, s.To}
			if sets[p] == nil {
				sets[p] = &slots.Set{}
				order = append(order, p)
			}
			sets[p].Add(slots.MustNew(s.Slot))
		}
		for _, p := range order {
			parts = append(parts, fmt.Sprintf("slots %s %s->%s", sets[p].String(), orDash(p.from), p.to))
		}
		for _, n := range ev.Nodes {
			parts = append(parts, fmt.Sprintf("node %s %s (%s, weight %d)", n.ID, n.State, n.Address, n.Weight))
		}
		for _, id := range ev.RemovedNodes {
			parts = append(parts, "node "+id+" removed")
		}
	}
	for _, m := range ev.Migrations {
		parts = append(parts, fmt.Sprintf("moving slot %d %s->%s %s", m.Slot, m.From, m.To, m.Phase))
	}
	if len(parts) == 0 {
		parts = append(parts, "no owner change")
	}
	_, err := fmt.Fprintf(g.stdout, "version %d: %s\n", ev.Version, strings.Join(parts, "; "))
	return err
}
