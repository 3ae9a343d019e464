package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotd/slotd/slots"
)

func itemRebalance(ctx context.Context, c *config, shm string, w io.Writer) error {
	load := loadavg()
	ps := &procs{dir: c.tmp}
	defer ps.stopAll()

	// Redis: three masters and an empty fourth.
	logf("item 3: redis: 3 masters + 1 empty, %d keys", c.rebalanceKeys)
	r, err := startRedis(ctx, ps, filepath.Join(c.tmp, "redis3"), 4, 3)
	if err != nil {
		return err
	}
	if err := r.fillSpread(ctx, c.rebalanceKeys, 100); err != nil {
		return err
	}
	redisArgs := []string{"--cluster", "rebalance", r.addr(0), "--cluster-use-empty-masters"}
	logf("item 3: redis rebalance (load %s)", loadavg())
	redisTook, _, err := timed(ctx, "redis-cli", redisArgs...)
	if err != nil {
		return err
	}
	redisMoved, redisKeys := 0, int64(0)
	{
		cl := redis.NewClient(&redis.Options{Addr: r.addr(0)})
		ss, err := cl.ClusterSlots(ctx).Result()
		cl.Close()
		if err != nil {
			return err
		}
		for _, s := range ss {
			if s.Nodes[0].Addr == r.addr(3) {
				redisMoved += int(s.End-s.Start) + 1
			}
		}
		for i := range r.ports {
			cl := redis.NewClient(&redis.Options{Addr: r.addr(i)})
			n, err := cl.DBSize(ctx).Result()
			cl.Close()
			if err != nil {
				return err
			}
			redisKeys += n
		}
	}
	logf("item 3: redis rebalance: %v, %d slots to the new master, %d keys after", redisTook, redisMoved, redisKeys)
	ps.stopAll()

	// Ours: slotd's etcd on tmpfs; slotkv as -rebalance-durable says.
	kvDir := filepath.Join(shm, "kv3")
	if c.rebalanceDurable {
		kvDir = filepath.Join(c.tmp, "kv3")
	}
	logf("item 3: ours: slotd + 3 slotkv + 1 empty (slotkv durable on disk: %v)", c.rebalanceDurable)
	// slotd's defaults unless -rebalance-parallelism asks for a cap.
	var slotdArgs []string
	settings := "slotd's defaults (a window of 12 moves in flight, each donor copying one slot holding data at a time: every slot here is near-empty, about 1.3 KB)"
	if c.rebalanceParallelism > 0 {
		slotdArgs = []string{"--move-parallelism", strconv.Itoa(c.rebalanceParallelism)}
		settings = fmt.Sprintf("slotd `--move-parallelism %d`", c.rebalanceParallelism)
	}
	oc, err := startOurs(ctx, ps, c.bin, filepath.Join(shm, "slotd3"), kvDir, 4, 3, c.rebalanceDurable, slotdArgs...)
	if err != nil {
		return err
	}
	defer oc.close()
	cold, empty, err := timeEmptyMoves(ctx, c, oc)
	if err != nil {
		return err
	}
	logf("item 3: ours: loading %d keys", c.rebalanceKeys)
	if err := oc.put(ctx, c.rebalanceKeys, 100, 64, func(i int) string { return "user:" + strconv.Itoa(i) }); err != nil {
		return err
	}
	auto, err := ourRebalance(ctx, c, oc, "")
	if err != nil {
		return err
	}
	oc.close()
	ps.stopAll()
	// Like for like: a fresh cluster, the same load, and a plan of slot
	// counts (what redis-cli balances), so both move 4,096 slots.
	logf("item 3: ours again, a plan by slot counts")
	oc, err = startOurs(ctx, ps, c.bin, filepath.Join(shm, "slotd3b"), kvDir+"b", 4, 3, c.rebalanceDurable, slotdArgs...)
	if err != nil {
		return err
	}
	defer oc.close()
	logf("item 3: ours: loading %d keys", c.rebalanceKeys)
	if err := oc.put(ctx, c.rebalanceKeys, 100, 64, func(i int) string { return "user:" + strconv.Itoa(i) }); err != nil {
		return err
	}
	bySlots, err := ourRebalance(ctx, c, oc, "slots")
	if err != nil {
		return err
	}
	oc.close()
	ps.stopAll()

	kvSettings := "slotkv `--fsync=false` with its data on tmpfs (the fastest we have; `-rebalance-durable` runs slotkv `--fsync=true` on disk)"
	if c.rebalanceDurable {
		kvSettings = "slotkv `--fsync=true` with its data on disk"
	}
	ourCmd := "slotd started with its defaults (no --move-parallelism)"
	benchCmd := "`cd bench && go run ./cmd/cluster -items 3`"
	if c.rebalanceParallelism > 0 {
		ourCmd = fmt.Sprintf("`slotd --move-parallelism %d`", c.rebalanceParallelism)
		benchCmd = fmt.Sprintf("`cd bench && go run ./cmd/cluster -items 3 -rebalance-parallelism %d`", c.rebalanceParallelism)
	}
	// Issue 19, item 1: faster than redis-cli at slotd's defaults, with the
	// cutover pause p99 within 20 ms (a histogram bucket bound at or below
	// it: the bound is what the metric can show). Judged on both plans.
	verdict := func(r rebalanceRun) (string, bool) {
		faster, pauseOK := r.took < redisTook, r.cut99 <= 0.020
		switch {
		case c.rebalanceParallelism > 0:
			return "not applicable: the target is slotd's defaults, this run set --move-parallelism", false
		case !faster && !pauseOK:
			return "NOT met: slower than Redis and the pause p99 is above 20 ms", false
		case !faster:
			return "NOT met: slower than Redis", false
		case !pauseOK:
			return "NOT met: the pause p99 is above 20 ms", false
		}
		return "met", true
	}
	metAuto, _ := verdict(auto)
	metSlots, _ := verdict(bySlots)
	fmt.Fprintf(w, "### 3. Rebalancing 3 -> 4 nodes, %d keys x 100 B\n\n", c.rebalanceKeys)
	fmt.Fprintf(w, "Target (issue 19, item 1): `slotctl rebalance --yes` with slotd's defaults faster than `redis-cli --cluster rebalance`, "+
		"with the cutover write pause p99 <= 20 ms. This run: `slotctl rebalance --yes` (slotd's default plan, `--balance-by auto`: %d slots): %s (%s vs Redis %s, ratio %s; pause p99 ≤ %s); "+
		"`slotctl rebalance --yes --balance-by slots` (slot counts, like redis-cli: %d slots): %s (%s, ratio %s; pause p99 ≤ %s).\n\n",
		auto.moved, metAuto, fmtDur(auto.took), fmtDur(redisTook), ratio(redisTook.Seconds(), auto.took.Seconds()), fmtDur(time.Duration(auto.cut99*1e9)),
		bySlots.moved, metSlots, fmtDur(bySlots.took), ratio(redisTook.Seconds(), bySlots.took.Seconds()), fmtDur(time.Duration(bySlots.cut99*1e9)))
	fmt.Fprintf(w, "Redis: three masters loaded, an empty fourth added with `redis-cli --cluster add-node`, then the rebalance command timed (its default `--cluster-pipeline` 10). "+
		"Ours: three slotkv nodes loaded through the SDK, a fourth registered, then `slotctl rebalance --yes` timed (plan + apply + wait; "+
		"its wait polls every 300 ms), on a fresh cluster for each plan. `--balance-by auto` (slotd's default) balances the bytes and requests the nodes report, within 10%%, so it may move fewer slots than a balance of slot counts. "+
		"Settings of our figure: %s, slotd's embedded etcd on tmpfs (/dev/shm: each move waits for a few etcd commits), "+
		"throttle unlimited, %s. Empty-slot moves: Admin.Move to the SDK's map showing the new owner, before the load, %d moves (slots n1 -> n2 and back), after a first move timed apart (it dials the stores: %s). "+
		"Ratio = Redis / ours. 1-minute load average at the start: %s.\n\n", kvSettings, settings, len(empty), fmtDur(cold), load)
	var rows []row
	for _, r := range []struct {
		run  rebalanceRun
		plan string
		met  string
	}{{auto, "", metAuto}, {bySlots, " --balance-by slots", metSlots}} {
		rows = append(rows,
			row{fmt.Sprintf("rebalance 3 -> 4, `slotctl rebalance --yes%s` (ours %d slots, Redis %d slots); target: faster than Redis at slotd's defaults with pause p99 <= 20 ms: %s", r.plan, r.run.moved, redisMoved, r.met),
				fmtDur(r.run.took), fmtDur(redisTook), ratio(redisTook.Seconds(), r.run.took.Seconds()),
				fmt.Sprintf("`slotctl rebalance --yes%s` against %s; `redis-cli --cluster rebalance 127.0.0.1:PORT --cluster-use-empty-masters`; %s", r.plan, ourCmd, benchCmd)},
			row{"per moved slot, whole rebalance / slots", fmtDur(r.run.took / time.Duration(max(1, r.run.moved))), fmtDur(redisTook / time.Duration(max(1, redisMoved))),
				ratio(redisTook.Seconds()/float64(max(1, redisMoved)), r.run.took.Seconds()/float64(max(1, r.run.moved))), "same"},
			row{fmt.Sprintf("one move inside the rebalance, begin -> commit, p50 / p99 (%d moves)", r.run.nCut), fmt.Sprintf("≤ %s / ≤ %s", fmtDur(time.Duration(r.run.mv50*1e9)), fmtDur(time.Duration(r.run.mv99*1e9))), "-", "-",
				"`slotd_mover_move_duration_seconds` on slotd's /metrics (histogram bucket bounds)"},
			row{fmt.Sprintf("cutover write pause inside the rebalance, p50 / p99 (%d moves); target p99 <= 20 ms: %s", r.run.nCut, map[bool]string{true: "met", false: "NOT met"}[r.run.cut99 <= 0.020]),
				fmt.Sprintf("≤ %s / ≤ %s", fmtDur(time.Duration(r.run.cut50*1e9)), fmtDur(time.Duration(r.run.cut99*1e9))), "20 ms (target)", ratio(0.020, r.run.cut99),
				"`slotd_mover_cutover_pause_seconds` on slotd's /metrics (histogram bucket bounds, half octaves)"})
	}
	rows = append(rows, emptyMoveRow(quantile(empty, 0.5), quantile(empty, 0.99), benchCmd))
	printTable(w, rows)
	return nil
}

// rebalanceRun is one `slotctl rebalance --yes` on our cluster.
type rebalanceRun struct {
	took                     time.Duration
	moved, nCut              int
	cut50, cut99, mv50, mv99 float64
}

// ourRebalance runs `slotctl rebalance --yes` (with --balance-by by, if
// set) and reads what it did from the SDK's map and slotd's metrics.
func ourRebalance(ctx context.Context, c *config, oc *ourCluster, by string) (rebalanceRun, error) {
	var r rebalanceRun
	args := []string{"--endpoints", oc.slotdAddr, "rebalance", "--yes", "--reason", "bench"}
	if by != "" {
		args = append(args, "--balance-by", by)
	}
	logf("item 3: ours: slotctl %v (load %s)", args[2:], loadavg())
	mBefore, _ := oc.metrics()
	took, _, err := timed(ctx, filepath.Join(c.bin, "slotctl"), args...)
	if err != nil {
		return r, err
	}
	r.took = took
	mAfter, _ := oc.metrics()
	r.cut50, r.nCut = histQuantile(mBefore, mAfter, "slotd_mover_cutover_pause_seconds", 0.5)
	r.cut99, _ = histQuantile(mBefore, mAfter, "slotd_mover_cutover_pause_seconds", 0.99)
	r.mv50, _ = histQuantile(mBefore, mAfter, "slotd_mover_move_duration_seconds", 0.5)
	r.mv99, _ = histQuantile(mBefore, mAfter, "slotd_mover_move_duration_seconds", 0.99)
	// The SDK's map may lag the directory by a version or two.
	if err := poll(ctx, 10*time.Second, 20*time.Millisecond, "map after rebalance", func() error {
		m := oc.sdk.Map()
		r.moved = 0
		for i := range slots.Count {
			if m.OwnerID(slots.MustNew(i)) == "n4" {
				r.moved++
			}
		}
		if r.moved < r.nCut {
			return fmt.Errorf("n4 owns %d slots, %d moves committed", r.moved, r.nCut)
		}
		return nil
	}); err != nil {
		return r, err
	}
	logf("item 3: ours rebalance: %v, %d slots to n4", r.took, r.moved)
	return r, nil
}

// emptyMoveTarget is issue 19 item 2's bound on an empty slot's move, end
// to end (the protocol alone: <= 3 ms, mover BenchmarkEmptySlotMove).
const emptyMoveTarget = 5 * time.Millisecond

// emptyMoveRow is the per-slot control overhead row, against its target.
func emptyMoveRow(p50, p99 time.Duration, benchCmd string) row {
	met := "met"
	if p50 > emptyMoveTarget {
		met = "NOT met"
	}
	return row{
		fmt.Sprintf("empty-slot move end to end (per-slot control overhead), p50 / p99; target (issue 19 item 2): p50 <= %s: %s", fmtDur(emptyMoveTarget), met),
		fmtDur(p50) + " / " + fmtDur(p99), fmtDur(emptyMoveTarget) + " (target)", ratio(emptyMoveTarget.Seconds(), p50.Seconds()),
		"Admin.Move (`slotctl move SLOT --to ID`) until the SDK map shows it; " + benchCmd,
	}
}
