package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// report prints the simulation's Markdown section.
func report(w io.Writer, c config, rs []*result) {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	fmt.Fprintf(w, "## Fleet: %d store nodes on one slotd\n\n", c.nodes)
	fmt.Fprintf(w, "`make fleet` (bench/cmd/fleet: `-nodes %d -zones %d -window %v -quiet-window %v -moves %d -move-workers %d`), %s, %s,\n",
		c.nodes, c.zones, c.window, c.quietWindow, c.moves, c.workers, time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.Version())
	fmt.Fprintf(w, "%s, %d cores shared with other work (load averages per window below). etcd and slotd (its defaults, over\n", cpu, runtime.NumCPU())
	fmt.Fprintln(w, "that etcd) are processes of their own; the nodes run in the harness's process (\"nodes' CPU\"). etcd's figures are")
	fmt.Fprintln(w, "its own Prometheus counters; \"writes\" are raft proposals committed (each one WAL entry and fsync batch),")
	fmt.Fprintln(w, "\"puts\" and \"reads\" its mvcc counters (a transaction counts each operation in it).")
	fmt.Fprintln(w)
	for _, r := range rs {
		how := "named in the bootstrap"
		if r.registered > 0 {
			how = fmt.Sprintf("registering themselves first (all registered after %v)", r.registered.Round(time.Second))
		}
		fmt.Fprintf(w, "rf %d: the bootstrap took %v; %d nodes %s held the map %v after they started (batches of %d).\n",
			r.rf, r.bootstrap.Round(time.Millisecond), r.nodes, how, r.startup.Round(time.Second), c.joinBatch)
	}
	table(w, nil, "rf", "window", "s", "etcd writes/s", "puts/s", "reads/s", "lease renewals/s", "WAL bytes/s", "bytes into etcd/s",
		"etcd requests/s by method", "slotd CPU", "etcd CPU", "nodes' CPU", "slotd RSS (heap)", "etcd RSS", "heartbeats/s", "load reports/s", "load avg")
	for _, r := range rs {
		for _, wd := range r.windows {
			s := wd.secs()
			fmt.Fprintf(w, "| %d | %s | %.0f | %.1f | %.1f | %.1f | %.1f | %s | %s | %s | %.3f | %.3f | %.3f | %s (%s) | %s | %.1f | %.1f | %s |\n",
				r.rf, wd.name, s, wd.etcdRate(mProposals), wd.etcdRate(mPuts), wd.etcdRate(mRanges), wd.etcdRate(mRenewed),
				kib(wd.etcdRate(mWALBytes)), kib(wd.etcdRate(mRecvBytes)), methods(wd),
				cores(wd.a.slotdU, wd.b.slotdU, s), cores(wd.a.etcdU, wd.b.etcdU, s), cores(wd.a.me, wd.b.me, s),
				mib(float64(wd.b.slotdU.rss)), mib(wd.b.slotd.sum(mHeap)), mib(float64(wd.b.etcdU.rss)),
				wd.slotdRate(mHandled, rpc("Heartbeat")), wd.slotdRate(mHandled, rpc("Report")), wd.b.load)
		}
	}
	table(w, []string{
		"Per move (directory-level moves of empty slots: at rf 1 BeginMove + CommitFencedMove, the mover's two",
		"transactions; at rf 3 a replica moved to another node of its zone, remove-replica + add-learner + join-isr;",
		"while the nodes run, each commit reaches every one of them through slotd's watch):",
	}, "rf", "window", "moves/s", "directory txns/move", "etcd writes/move", "WAL bytes/move", "put bytes/move", "bytes into etcd/move",
		"slotd CPU/move", "etcd CPU/move", "nodes' CPU/move")
	for _, r := range rs {
		for _, wd := range r.windows {
			if wd.moves == 0 {
				continue
			}
			per := func(v float64) float64 { return v * wd.secs() / float64(wd.moves) }
			ms := func(a, b usage) string {
				return fmt.Sprintf("%.2f ms", float64((b.cpu-a.cpu).Microseconds())/1000/float64(wd.moves))
			}
			fmt.Fprintf(w, "| %d | %s | %.0f | %d | %.2f | %s | %s | %s | %s | %s | %s |\n", r.rf, wd.name, float64(wd.moves)/wd.secs(), wd.steps,
				per(wd.etcdRate(mProposals)), kib(per(wd.etcdRate(mWALBytes))), kib(per(wd.etcdRate(mPutBytes))), kib(per(wd.etcdRate(mRecvBytes))),
				ms(wd.a.slotdU, wd.b.slotdU), ms(wd.a.etcdU, wd.b.etcdU), ms(wd.a.me, wd.b.me))
		}
	}
	table(w, []string{
		"etcd's db after the moves, at the directory's default bounds (history 10,000 versions, audit 10,000 entries per",
		"kind). \"Compacted\" is the file after a compaction to the last revision and a defragmentation: what the bounds",
		"keep once etcd's hour of revisions (slotd's autocompaction retention) has passed.",
	}, "rf", "moves", "revisions", "db before", "db after moves (in use)", "compacted", "growth/move", "quota",
		"moves/s that fill the quota in 1 h", "keys kept (bytes)")
	for _, r := range rs {
		d := r.db
		if d.moves == 0 {
			continue
		}
		growth := (d.after - d.before) / float64(d.moves)
		fill := "-"
		if growth > 0 {
			fill = fmt.Sprintf("%.0f", d.quota/growth/3600)
		}
		fmt.Fprintf(w, "| %d | %d | %d | %s | %s (%s) | %s | %s | %s | %s | %s |\n", r.rf, d.moves, d.revisions, mib(d.before),
			mib(d.after), mib(d.afterInUse), mib(d.compacted), kib(growth), mib(d.quota), fill, keysKept(d))
	}
	fmt.Fprintln(w)
}

// table starts a Markdown table after a blank line, the intro's lines and
// another blank line.
func table(w io.Writer, intro []string, cols ...string) {
	fmt.Fprintln(w)
	if len(intro) > 0 {
		fmt.Fprintln(w, strings.Join(intro, "\n"))
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
}

// methods lists etcd's gRPC requests per second by method, busiest first.
func methods(wd window) string {
	const m = "grpc_server_handled_total"
	rates := map[string]float64{}
	for series := range wd.b.etcd {
		_, rest, ok := strings.Cut(series, `grpc_method="`)
		if !ok || !strings.HasPrefix(series, m+"{") {
			continue
		}
		name, _, _ := strings.Cut(rest, `"`)
		if _, seen := rates[name]; !seen {
			rates[name] = wd.etcdRate(m, rpc(name))
		}
	}
	names := slices.SortedFunc(maps.Keys(rates), func(a, b string) int { return cmp.Compare(rates[b], rates[a]) })
	var out []string
	for _, n := range names {
		if rates[n] >= 0.05 {
			out = append(out, fmt.Sprintf("%s %.1f", n, rates[n]))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

// keysKept lists the directory's keys by part of the layout.
func keysKept(d dbFigures) string {
	var out []string
	for _, p := range layoutParts {
		if d.keys[p] > 0 {
			out = append(out, fmt.Sprintf("%s %d (%s)", strings.TrimSuffix(p, "/"), d.keys[p], kib(float64(d.values[p]))))
		}
	}
	return strings.Join(out, ", ")
}
