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
	"github.com/slotd/slotd/internal/backoff"
	"github.com/slotd/slotd/slots"
)

func init() { register(newWatchCmd) }

// watchJSON is one line of `slotctl watch -o json` (JSON lines, one object
// per map version as it arrives):
//
//	{"time": "2026-01-02T03:04:05.123Z", "version": 13, "from_version": 12, "full": false,
//	 "slots": [{"slot": 17, "from": "n1", "to": "n4"}],
//	 "nodes": [{"id": "n4", "address": "127.0.0.1:7504", "zone": "", "weight": 1, "state": "active"}],
//	 "removed_nodes": [], "migrations": [{"slot": 18, "from": "n1", "to": "n4", "phase": "copying", "move_id": "..."}]}
//
// The first line is the full map (full true, from_version 0, every node,
// no slots). After a reconnect slotd may send a full map again; slots then
// lists what changed since the last version seen. nodes holds the nodes
// added or changed; migrations is the complete set of moves in flight.
// time is when slotctl received the version (UTC, milliseconds). With
// --node or --slot, each list keeps what concerns them only, and a version
// where nothing of theirs changed is not printed (the first, full map is).
type watchJSON struct {
	Time         string          `json:"time"`
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

type watchOptions struct {
	count      int
	timestamps bool
	filter     watchFilter
	node, slot string
}

func newWatchCmd(g *globals) *cobra.Command {
	var o watchOptions
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print map changes as they happen, until Ctrl-C",
		Long: `watch follows slotd's map stream and prints one line per directory version:
slots that changed owner, nodes added, changed or removed, moves in flight. It
reconnects (from the last version seen) when slotd goes away, and ends with
Ctrl-C (exit 0) or after --count versions printed. Each line starts with the
time it arrived (--timestamps=false leaves it out). --node and --slot keep
what concerns one node or some slots, and skip versions that change nothing
of theirs.`,
		Example: `  slotctl watch
  slotctl watch --node n4
  slotctl watch --slot 0-99,512
  slotctl watch -o json --count 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.count < 0 {
				return usagef("--count must not be negative")
			}
			o.filter.node = o.node
			if o.slot != "" {
				set, err := slots.ParseSet(o.slot)
				if err != nil {
					return usagef("--slot %q: %v (give slots and ranges, e.g. 1-5,7)", o.slot, err)
				}
				o.filter.slots = &set
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				err := g.watch(ctx, c, &o)
				if ctx.Err() != nil {
					return nil // Ctrl-C is how watch ends
				}
				return err
			})
		},
	}
	cmd.Flags().IntVar(&o.count, "count", 0, "stop after this many versions printed (0: until Ctrl-C)")
	cmd.Flags().BoolVar(&o.timestamps, "timestamps", true, "start each line with the time it arrived (UTC); JSON always has \"time\"")
	cmd.Flags().StringVar(&o.node, "node", "", "only changes of this node: its slots gained or lost, the node itself, its moves")
	cmd.Flags().StringVar(&o.slot, "slot", "", "only changes of these slots (1-5,7): owners and moves")
	return cmd
}

func (g *globals) watch(ctx context.Context, c *conn, o *watchOptions) error {
	var cur *slotmap.Map
	seen := 0
	lastMoves := ""
	bo := backoff.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
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
			bo.Reset()
			var ev watchJSON
			if cur, ev, err = applyWatch(cur, resp); err != nil {
				return err
			}
			ev.Time = time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")
			var show bool
			if show, lastMoves = o.filter.keep(&ev, lastMoves); !show {
				continue
			}
			if err = g.printWatch(ev, o.timestamps); err != nil {
				return err
			}
			if seen++; o.count > 0 && seen >= o.count {
				return nil
			}
		}
		if ctx.Err() != nil || status.Code(err) != codes.Unavailable && !errors.Is(err, io.EOF) {
			return err
		}
		fmt.Fprintf(g.stderr, "slotctl: lost the map stream (%s); reconnecting\n", oneLine(fromRPC(err, g).Error()))
		if !bo.Sleep(ctx) {
			return nil
		}
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

func (g *globals) printWatch(ev watchJSON, timestamps bool) error {
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
	prefix := ""
	if timestamps {
		prefix = ev.Time + " "
	}
	_, err := fmt.Fprintf(g.stdout, "%sversion %d: %s\n", prefix, ev.Version, strings.Join(parts, "; "))
	return err
}

// watchFilter is --node and --slot: what of a version concerns them.
type watchFilter struct {
	node  string
	slots *slots.Set
}

func (f watchFilter) on() bool { return f.node != "" || f.slots != nil }

func (f watchFilter) slot(s int, from, to string) bool {
	if f.slots != nil && !f.slots.Contains(slots.MustNew(s)) {
		return false
	}
	return f.node == "" || from == f.node || to == f.node
}

// keep narrows ev to what the filter concerns and says whether to print
// it: the first full map always, later versions when a slot or node of
// theirs changed or their moves in flight did (lastMoves is what they were
// at the last version printed; keep returns the new value).
func (f watchFilter) keep(ev *watchJSON, lastMoves string) (bool, string) {
	if !f.on() {
		return true, lastMoves
	}
	ev.Slots = slices.DeleteFunc(ev.Slots, func(s slotMoveJSON) bool { return !f.slot(s.Slot, s.From, s.To) })
	ev.Migrations = slices.DeleteFunc(ev.Migrations, func(m migrationJSON) bool { return !f.slot(m.Slot, m.From, m.To) })
	first := ev.Full && ev.FromVersion == 0
	if !first {
		ev.Nodes = slices.DeleteFunc(ev.Nodes, func(n nodeJSON) bool { return f.slots != nil || n.ID != f.node })
		ev.RemovedNodes = slices.DeleteFunc(ev.RemovedNodes, func(id string) bool { return f.slots != nil || id != f.node })
	}
	moves := fmt.Sprint(ev.Migrations)
	changed := first || len(ev.Slots) > 0 || len(ev.Nodes) > 0 || len(ev.RemovedNodes) > 0 || moves != lastMoves
	if !changed {
		return false, lastMoves
	}
	return true, moves
}
