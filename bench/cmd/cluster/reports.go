package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
)

// slotdNow is slotd's clock, as its Load service reports it: the reports'
// receive times are on that clock.
func (c *ourCluster) slotdNow(ctx context.Context) (time.Time, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := slotdv1.NewLoadClient(c.conn).Get(cctx, &slotdv1.GetLoadRequest{})
	if err != nil {
		return time.Time{}, fmt.Errorf("load view: %w", err)
	}
	return r.GetNow().AsTime(), nil
}

// waitReports waits until slotd holds, for every store node of the cluster
// (the empty one too), a load report it received after since: what a
// user's cluster has a report interval after loading, and what a default
// (load-aware) plan reads. interval is the nodes' report interval; the wait
// is bounded by three of them (when slotd takes a node as unknown) and a
// margin. It returns how long it waited.
func (c *ourCluster) waitReports(ctx context.Context, since time.Time, interval time.Duration) (time.Duration, error) {
	ids := make([]string, 0, len(c.nodes))
	for id := range c.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	start := time.Now()
	bound := 3*interval + 5*time.Second
	err := poll(ctx, bound, 200*time.Millisecond, "load reports", func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := slotdv1.NewLoadClient(c.conn).Get(cctx, &slotdv1.GetLoadRequest{NodeIds: ids})
		if err != nil {
			return fmt.Errorf("load view: %w", err)
		}
		got := map[string]*slotdv1.NodeLoadInfo{}
		for _, n := range r.GetNodes() {
			got[n.GetNodeId()] = n
		}
		var missing []string
		for _, id := range ids {
			n := got[id]
			switch {
			case n == nil:
				missing = append(missing, id+" (not in slotd's load view)")
			case !n.GetKnown():
				missing = append(missing, id+" (never reported, or its last report expired)")
			case !n.GetReported().AsTime().After(since):
				missing = append(missing, fmt.Sprintf("%s (last report %s before loading ended)",
					id, since.Sub(n.GetReported().AsTime()).Round(time.Millisecond)))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("no load report since loading ended from %s (nodes report every %v)", strings.Join(missing, ", "), interval)
		}
		return nil
	})
	return time.Since(start), err
}

// slotkvReportInterval is slotkv's default --load-report-interval
// (node.DefaultReportInterval; that package is not imported here: it
// would add its dependencies to this module).
const slotkvReportInterval = 10 * time.Second

// reportInterval is the slotkv --load-report-interval the cluster runs
// with: d, or slotkv's default when d is 0.
func reportInterval(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return slotkvReportInterval
}
