package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/slotd/slotd/slots"
)

// timeEmptyMoves times c.emptyMoves moves of empty slots from n1 to n2 and
// back on oc (Admin.Move until the SDK's map shows the new owner), after a
// first move timed apart: it dials the stores and starts the mover's
// connections (cold), which no later move pays.
func timeEmptyMoves(ctx context.Context, c *config, oc *ourCluster) (cold time.Duration, empty []time.Duration, err error) {
	m := oc.sdk.Map()
	var todo []slots.Slot
	for i := 0; i < slots.Count && len(todo) < c.emptyMoves+1; i++ {
		s := slots.MustNew(i)
		if m.OwnerID(s) == "n1" {
			todo = append(todo, s)
		}
	}
	if cold, err = oc.move(ctx, todo[0], "n2"); err != nil {
		return 0, nil, err
	}
	todo = todo[1:]
	logf("item 3: ours: first (cold) empty-slot move %v; %d more each way (load %s)", cold, len(todo), loadavg())
	for _, to := range []string{"n2", "n1"} {
		for _, s := range todo {
			d, err := oc.move(ctx, s, to)
			if err != nil {
				return 0, nil, err
			}
			if d > 100*time.Millisecond {
				logf("item 3: ours: empty-slot move of slot %d to %s took %v", s.Int(), to, d)
			}
			empty = append(empty, d)
		}
	}
	return cold, empty, nil
}

// itemEmptyMoves is item 3's empty-slot moves alone (-empty-moves-only):
// no Redis, no rebalance, the same cluster and row as in item 3.
func itemEmptyMoves(ctx context.Context, c *config, shm string, w io.Writer) error {
	load := loadavg()
	ps := &procs{dir: c.tmp}
	defer ps.stopAll()
	oc, err := startOurs(ctx, ps, c.bin, filepath.Join(shm, "slotd3"), filepath.Join(shm, "kv3"), 4, 3, false)
	if err != nil {
		return err
	}
	defer oc.close()
	cold, empty, err := timeEmptyMoves(ctx, c, oc)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "### 3. Empty-slot moves alone (-empty-moves-only)\n\n")
	fmt.Fprintf(w, "Admin.Move to the SDK's map showing the new owner, %d moves (slots n1 -> n2 and back), after a first move timed apart (%s); "+
		"slotd's defaults, its embedded etcd and slotkv `--fsync=false` on tmpfs. 1-minute load average at the start: %s.\n\n", len(empty), fmtDur(cold), load)
	printTable(w, []row{emptyMoveRow(quantile(empty, 0.5), quantile(empty, 0.99), "`cd bench && go run ./cmd/cluster -items 3 -empty-moves-only`")})
	return nil
}
