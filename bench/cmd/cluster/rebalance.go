package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/slotd/slotd/api/slotdv1"
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
	// The nodes report their load at slotkv's default interval unless
	// -rebalance-report-interval sets one.
	if c.rebalanceReportInterval > 0 {
		extraNodeArgs = []string{"--load-report-interval", c.rebalanceReportInterval.String()}
		defer func() { extraNodeArgs = nil }()
	}
	// newCluster starts slotd, three loaded slotkv nodes and an empty n4
	// (timing the empty-slot moves first when asked); loaded is slotd's
	// clock when the load ended.
	var cold time.Duration
	var empty []time.Duration
	newCluster := func(name string, emptyMoves bool) (oc *ourCluster, loaded time.Time, err error) {
		oc, err = startOurs(ctx, ps, c.bin, filepath.Join(shm, "slotd3"+name), kvDir+name, 4, 3, c.rebalanceDurable, slotdArgs...)
		if err != nil {
			return nil, loaded, err
		}
		if emptyMoves {
			if cold, empty, err = timeEmptyMoves(ctx, c, oc); err != nil {
				return oc, loaded, err
			}
		}
		logf("item 3: ours: loading %d keys", c.rebalanceKeys)
		if err := oc.put(ctx, c.rebalanceKeys, 100, 64, func(i int) string { return "user:" + strconv.Itoa(i) }); err != nil {
			return oc, loaded, err
		}
		loaded, err = oc.slotdNow(ctx)
		return oc, loaded, err
	}
	// The default plan (load-aware: whatever the planner chose from the
	// nodes' reports), then, on a fresh cluster with the same load, a plan
	// of slot counts: what redis-cli balances, all 4,096 slots to n4.
	var results []rebalanceRun
	for _, pc := range []struct{ name, by string }{{"", ""}, {"b", "slots"}} {
		if pc.by != "" {
			logf("item 3: ours again, a fresh cluster, --balance-by %s", pc.by)
		}
		oc, loaded, err := newCluster(pc.name, pc.name == "")
		if oc != nil {
			defer oc.close()
		}
		if err != nil {
			return err
		}
		rr, err := ourRebalance(ctx, c, oc, pc.by, "n4", loaded)
		if err != nil {
			return fmt.Errorf("item 3: slotctl rebalance (balance by %q): %w", pc.by, err)
		}
		results = append(results, rr)
		oc.close()
		ps.stopAll()
	}
	auto, bySlots := results[0], results[1]

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
	if c.rebalanceReportInterval > 0 {
		benchCmd = strings.TrimSuffix(benchCmd, "`") + fmt.Sprintf(" -rebalance-report-interval %v`", c.rebalanceReportInterval)
	}
	// The rebalance target: faster than redis-cli at slotd's defaults, with the
	// cutover pause p99 within 20 ms (a histogram bucket bound at or below
	// it: the bound is what the metric can show). Judged on both plans.
	verdict := func(r rebalanceRun) (string, bool) {
		faster, pauseOK := r.took < redisTook, r.cut99 <= 0.020
		switch {
		case c.rebalanceParallelism > 0:
			return "not applicable: the target is slotd's defaults, this run set --move-parallelism", false
		case r.moved == 0:
			return "not judged: the plan moved nothing", false
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
	fmt.Fprintf(w, "Target: `slotctl rebalance --yes` with slotd's defaults faster than `redis-cli --cluster rebalance`, "+
		"with the cutover write pause p99 <= 20 ms. This run: `slotctl rebalance --yes` (slotd's default plan, which %s; %s): %s (%s vs Redis %s, ratio %s; pause p99 ≤ %s); "+
		"`slotctl rebalance --yes --balance-by slots` (slot counts, like redis-cli: %s): %s (%s, ratio %s; pause p99 ≤ %s).\n\n",
		planBalance(auto.plan), movesText(auto, "n4"), metAuto, fmtDur(auto.took), fmtDur(redisTook), ratio(redisTook.Seconds(), auto.took.Seconds()), fmtDur(time.Duration(auto.cut99*1e9)),
		movesText(bySlots, "n4"), metSlots, fmtDur(bySlots.took), ratio(redisTook.Seconds(), bySlots.took.Seconds()), fmtDur(time.Duration(bySlots.cut99*1e9)))
	reportSetting := fmt.Sprintf("%v, slotkv's default", reportInterval(0))
	if c.rebalanceReportInterval > 0 {
		reportSetting = fmt.Sprintf("`--load-report-interval %v`", c.rebalanceReportInterval)
	}
	fmt.Fprintf(w, "Redis: three masters loaded, an empty fourth added with `redis-cli --cluster add-node`, then the rebalance command timed (its default `--cluster-pipeline` 10). "+
		"Ours: three slotkv nodes loaded through the SDK, a fourth registered, then `slotctl rebalance --yes` timed (plan + apply + wait; "+
		"its wait polls every 300 ms), on a fresh cluster for each plan. Before each rebalance, untimed, the harness waits until slotd holds a load report from every node (n4 too) "+
		"received after the load ended, as a user's cluster has (the nodes report every %s; it waited %s and %s), so the default plan reads the loaded data; "+
		"after it, every move of the plan (`-o json` prints the plan as it ended) must have committed and the SDK's map must show each moved slot on its move's target. "+
		"`--balance-by auto` (slotd's default) balances the bytes and requests the nodes report, within 10%%, so it may move fewer slots than a balance of slot counts, some of them between the old nodes. "+
		"Settings of our figure: %s, slotd's embedded etcd on tmpfs (/dev/shm: each move waits for a few etcd commits), "+
		"throttle unlimited, %s. Empty-slot moves: Admin.Move to the SDK's map showing the new owner, before the load, %d moves (slots n1 -> n2 and back), after a first move timed apart (it dials the stores: %s). "+
		"Ratio = Redis / ours. 1-minute load average at the start: %s.\n\n", reportSetting, fmtDur(auto.reportWait), fmtDur(bySlots.reportWait),
		kvSettings, settings, len(empty), fmtDur(cold), load)
	var rows []row
	for _, r := range []struct {
		run  rebalanceRun
		plan string
		met  string
	}{{auto, "", metAuto}, {bySlots, " --balance-by slots", metSlots}} {
		rows = append(rows,
			row{fmt.Sprintf("rebalance 3 -> 4, `slotctl rebalance --yes%s` (ours %d moves, Redis %d slots); target: faster than Redis at slotd's defaults with pause p99 <= 20 ms: %s", r.plan, r.run.moved, redisMoved, r.met),
				fmtDur(r.run.took), fmtDur(redisTook), ratio(redisTook.Seconds(), r.run.took.Seconds()),
				fmt.Sprintf("`slotctl -o json rebalance --yes%s` against %s; `redis-cli --cluster rebalance 127.0.0.1:PORT --cluster-use-empty-masters`; %s", r.plan, ourCmd, benchCmd)},
			row{fmt.Sprintf("the plan, which %s", planBalance(r.run.plan)),
				fmt.Sprintf("%s; %s copied (planned %s)", movesText(r.run, "n4"), bytesText(r.run.copied), bytesText(r.run.plan.GetTotalBytes())),
				fmt.Sprintf("%d slots to the new master", redisMoved), "-",
				"the plan as `slotctl -o json rebalance` printed it when it ended (balance_by, note, moves, bytes_copied); every move committed and in the SDK's map"},
			row{"per move (one slot each), whole rebalance / moves; Redis: / slots", fmtDur(r.run.took / time.Duration(max(1, r.run.moved))), fmtDur(redisTook / time.Duration(max(1, redisMoved))),
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
	took time.Duration
	// plan is the plan as it ended (`slotctl rebalance -o json`).
	plan *slotdv1.Plan
	// moved is the plan's moves, every one committed (skipped ones, whose
	// slot already had the target, included); toNew went to the new node,
	// between from one old node to another.
	moved, skipped, toNew, between int
	// slots is how many distinct slots the moves moved.
	slots int
	// copied is what the moves' transfers copied (bytes_copied).
	copied uint64
	// reportWait is how long the harness waited for the load reports.
	reportWait               time.Duration
	nCut                     int
	cut50, cut99, mv50, mv99 float64
}

// ourRebalance waits until slotd has a load report sent after loaded from
// every node, runs `slotctl rebalance --yes -o json` (with --balance-by by,
// if set), checks every move of the plan it printed against the SDK's map,
// and reads the moves' timings from slotd's metrics. newNode is the node
// added empty.
func ourRebalance(ctx context.Context, c *config, oc *ourCluster, by, newNode string, loaded time.Time) (rebalanceRun, error) {
	var r rebalanceRun
	var err error
	interval := reportInterval(c.rebalanceReportInterval)
	logf("item 3: ours: waiting for every node's load report (every %v) (load %s)", interval, loadavg())
	if r.reportWait, err = oc.waitReports(ctx, loaded, interval); err != nil {
		return r, err
	}
	logf("item 3: ours: every node reported after %v", r.reportWait.Round(time.Millisecond))
	args := []string{"--endpoints", oc.slotdAddr, "-o", "json", "rebalance", "--yes", "--reason", "bench"}
	if by != "" {
		args = append(args, "--balance-by", by)
	}
	logf("item 3: ours: slotctl %v (load %s)", args[2:], loadavg())
	mBefore, _ := oc.metrics()
	start := time.Now()
	out, err := runStdout(ctx, filepath.Join(c.bin, "slotctl"), args...)
	r.took = time.Since(start)
	if err != nil {
		return r, err
	}
	mAfter, _ := oc.metrics()
	r.cut50, r.nCut = histQuantile(mBefore, mAfter, "slotd_mover_cutover_pause_seconds", 0.5)
	r.cut99, _ = histQuantile(mBefore, mAfter, "slotd_mover_cutover_pause_seconds", 0.99)
	r.mv50, _ = histQuantile(mBefore, mAfter, "slotd_mover_move_duration_seconds", 0.5)
	r.mv99, _ = histQuantile(mBefore, mAfter, "slotd_mover_move_duration_seconds", 0.99)
	r.plan = &slotdv1.Plan{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(out), r.plan); err != nil {
		return r, fmt.Errorf("slotctl rebalance -o json: read the plan: %w\n%s", err, tail(out, 800))
	}
	if err := checkPlanCommitted(ctx, oc, r.plan); err != nil {
		return r, err
	}
	distinct := map[uint32]bool{}
	for _, mv := range r.plan.GetMoves() {
		distinct[mv.GetSlot()] = true
		r.moved++
		r.copied += mv.GetBytesCopied()
		if mv.GetSkipped() {
			r.skipped++
		}
		switch {
		case mv.GetTo() == newNode:
			r.toNew++
		case mv.GetFrom() != newNode:
			r.between++
		}
	}
	r.slots = len(distinct)
	if r.nCut != r.moved-r.skipped {
		logf("item 3: ours: note: %d cutover pauses observed, %d moves committed with a copy", r.nCut, r.moved-r.skipped)
	}
	if b, a := planStats(r.plan); b.maxB > 0 && r.plan.GetBalanceBy() != "slots" {
		logf("item 3: ours: the plan's max bytes / ops ratio (nodes of known load): %.2f / %.2f -> %.2f / %.2f", b.maxB, b.maxO, a.maxB, a.maxO)
	}
	logf("item 3: ours rebalance: %v, plan %s balances %s (note %q): %d moves of %d distinct slots (%d to %s, %d between the old nodes, %d skipped), %s copied (planned %s)",
		r.took, r.plan.GetId(), r.plan.GetBalanceBy(), r.plan.GetNote(), r.moved, r.slots, r.toNew, newNode, r.between, r.skipped, bytesText(r.copied), bytesText(r.plan.GetTotalBytes()))
	return r, nil
}

// checkPlanCommitted checks that every move of p (as it ended) committed,
// then waits until the SDK's map, which may lag the directory by a version
// or two, shows each moved slot owned by its move's target.
func checkPlanCommitted(ctx context.Context, oc *ourCluster, p *slotdv1.Plan) error {
	if st := p.GetState(); st != slotdv1.PlanState_PLAN_STATE_DONE {
		return fmt.Errorf("plan %s ended %s: %s", p.GetId(), st, p.GetError())
	}
	var bad []string
	want := map[uint32]string{} // slot -> its last move's target, in plan order
	var order []uint32
	for _, mv := range p.GetMoves() {
		if mv.GetPhase() != slotdv1.MovePhase_MOVE_PHASE_COMMITTED {
			b := fmt.Sprintf("slot %d %s -> %s %s", mv.GetSlot(), mv.GetFrom(), mv.GetTo(), mv.GetPhase())
			if e := mv.GetError(); e != "" {
				b += ": " + e
			}
			bad = append(bad, b)
		}
		if _, ok := want[mv.GetSlot()]; !ok {
			order = append(order, mv.GetSlot())
		}
		want[mv.GetSlot()] = mv.GetTo()
	}
	if len(bad) > 0 {
		return fmt.Errorf("plan %s done with %d of %d moves not committed: %s", p.GetId(), len(bad), len(p.GetMoves()), firstFew(bad, 5))
	}
	return poll(ctx, 10*time.Second, 20*time.Millisecond, "map after rebalance", func() error {
		m := oc.sdk.Map()
		var wrong []string
		for _, sl := range order {
			if got := m.OwnerID(slots.MustNew(int(sl))); got != want[sl] {
				wrong = append(wrong, fmt.Sprintf("slot %d owned by %s, its move's target %s", sl, got, want[sl]))
			}
		}
		if len(wrong) > 0 {
			return fmt.Errorf("the SDK's map (version %d) shows %d of the %d slots plan %s moved on another owner: %s",
				m.Version(), len(wrong), len(order), p.GetId(), firstFew(wrong, 5))
		}
		return nil
	})
}

func firstFew(xs []string, n int) string {
	if len(xs) <= n {
		return strings.Join(xs, "; ")
	}
	return strings.Join(xs[:n], "; ") + fmt.Sprintf("; and %d more", len(xs)-n)
}

// planBalance says what a plan balanced, as `slotctl plan` does: "balances
// auto within 10% of each node's share (the planner's note: "...")".
func planBalance(p *slotdv1.Plan) string {
	by := p.GetBalanceBy()
	if by == "" {
		by = "?"
	}
	out := "balances " + by
	if by != "slots" {
		out += fmt.Sprintf(" within %g%% of each node's share", p.GetTolerance()*100)
	}
	if n := p.GetNote(); n != "" {
		out += fmt.Sprintf(" (the planner's note: %q)", n)
	}
	if u := p.GetUnknownNodes(); len(u) > 0 {
		out += "; load unknown: " + strings.Join(u, ", ")
	}
	return out
}

// movesText is a run's moves: "2427 moves, 2337 to n4 and 90 between the
// old nodes".
func movesText(r rebalanceRun, newNode string) string {
	out := fmt.Sprintf("%d moves, %d to %s and %d between the old nodes", r.moved, r.toNew, newNode, r.between)
	if r.slots != r.moved {
		out += fmt.Sprintf(" (%d distinct slots: some moved more than once)", r.slots)
	}
	if r.skipped > 0 {
		out += fmt.Sprintf(" (%d skipped: the slot had its target already)", r.skipped)
	}
	return out
}

// bytesText prints n bytes in kB below a megabyte, else in MB.
func bytesText(n uint64) string {
	if n < 1e6 {
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return mb(n)
}

// emptyMoveTarget is the target bound on an empty slot's move, end
// to end (the protocol alone: <= 3 ms, mover BenchmarkEmptySlotMove).
const emptyMoveTarget = 5 * time.Millisecond

// emptyMoveRow is the per-slot control overhead row, against its target.
func emptyMoveRow(p50, p99 time.Duration, benchCmd string) row {
	met := "met"
	if p50 > emptyMoveTarget {
		met = "NOT met"
	}
	return row{
		fmt.Sprintf("empty-slot move end to end (per-slot control overhead), p50 / p99; target: p50 <= %s: %s", fmtDur(emptyMoveTarget), met),
		fmtDur(p50) + " / " + fmtDur(p99), fmtDur(emptyMoveTarget) + " (target)", ratio(emptyMoveTarget.Seconds(), p50.Seconds()),
		"Admin.Move (`slotctl move SLOT --to ID`) until the SDK map shows it; " + benchCmd,
	}
}
