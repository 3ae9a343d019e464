package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/slotkv/kvclient"
	"github.com/slotd/slotd/slots"
)

// Item 4's client: impactRate ops/s, half GET half SET, on impactKeys keys
// of the moving slot, impactBefore of steady state, then the move.
const (
	impactRate   = 400
	impactKeys   = 1000
	impactBefore = 2 * time.Second
)

type impact struct {
	ops                      int64
	missed                   int64
	errsBefore, errsDuring   int
	firstErr                 string
	p50b, p99b, p50d, p99d   time.Duration
	maxDuring                time.Duration
	redirects, extraTrips    int64
	reloads                  int64
	moveTook                 time.Duration
	detail, cmd, moveCommand string
}

func (l *load) fill(im *impact) {
	l.mu.Lock()
	defer l.mu.Unlock()
	im.ops, im.missed = l.ops.Load(), l.missed.Load()
	im.errsBefore, im.errsDuring = l.errs["before"], l.errs["during"]
	im.firstErr = l.first["during"] + l.first["before"]
	im.p50b, im.p99b = quantile(l.lat["before"], 0.5), quantile(l.lat["before"], 0.99)
	im.p50d, im.p99d = quantile(l.lat["during"], 0.5), quantile(l.lat["during"], 0.99)
	im.maxDuring = quantile(l.lat["during"], 1)
}

func redisClientImpact(ctx context.Context, r *redisCluster, tag string, from, to int) (impact, error) {
	logf("item 4: redis client during a reshard (load %s)", loadavg())
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{r.addr(0)}})
	defer cc.Close()
	h := &countingHook{}
	cc.OnNewNode(func(c *redis.Client) { c.AddHook(h) })
	if err := cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		return impact{}, err
	}
	val := strings.Repeat("v", 100)
	l := newLoad(impactRate, 64, func(ctx context.Context, i int, set bool) error {
		k := "{" + tag + "}:" + strconv.Itoa(i%impactKeys)
		if set {
			return cc.Set(ctx, k, val, 0).Err()
		}
		if err := cc.Get(ctx, k).Err(); err != redis.Nil {
			return err
		}
		return nil
	})
	im, err := runImpact(ctx, l, func() (time.Duration, error) {
		d, _, err := timed(ctx, "redis-cli", r.reshardCmd(from, to, 10)...)
		return d, err
	}, func() (int64, int64) { return h.trips.Load() - l.ops.Load(), h.reloads.Load() })
	im.redirects = h.moved.Load() + h.ask.Load()
	im.detail = fmt.Sprintf("MOVED %d, ASK %d, CLUSTER SLOTS reloads %d", h.moved.Load(), h.ask.Load(), h.reloads.Load())
	im.cmd = "go-redis v9 ClusterClient; move: `redis-cli --cluster reshard ... --cluster-slots 1 --cluster-pipeline 10`"
	return im, err
}

func ourClientImpact(ctx context.Context, oc *ourCluster, tag string, s slots.Slot, to string, fsync bool) (impact, error) {
	logf("item 4: our client during a move (load %s)", loadavg())
	reg := prometheus.NewRegistry()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	sdk, err := client.New(wctx, client.Options{Endpoints: []string{oc.slotdAddr}, Registerer: reg})
	cancel()
	if err != nil {
		return impact{}, err
	}
	defer sdk.Close()
	kv := kvclient.New(sdk)
	defer kv.Close()
	val := []byte(strings.Repeat("v", 100))
	l := newLoad(impactRate, 64, func(ctx context.Context, i int, set bool) error {
		k := []byte("{" + tag + "}:" + strconv.Itoa(i%impactKeys))
		if set {
			_, err := kv.Put(ctx, k, val)
			return err
		}
		_, _, _, err := kv.Get(ctx, k)
		return err
	})
	fetches := func() int64 {
		c := &ourCluster{reg: reg}
		return int64(c.sdkCounter("slotd_client_map_refreshes_total", "source", "fetch"))
	}
	im, err := runImpact(ctx, l, func() (time.Duration, error) { return oc.move(ctx, s, to) }, func() (int64, int64) {
		// Every redirect or fenced answer is one extra KV request; a map
		// fetch one extra request to slotd. The watch stream is not a
		// request per move.
		return kv.Redirects() + kv.Fenced() + fetches(), fetches()
	})
	im.redirects = kv.Redirects()
	im.detail = fmt.Sprintf("MOVED/ASK %d, FENCED retries %d, map fetches %d", kv.Redirects(), kv.Fenced(), fetches())
	im.cmd = fmt.Sprintf("slotd SDK + kvclient (`slotkv/kvclient`); move: Admin.Move (`slotctl move SLOT --to ID`), slotkv `--fsync=%v`", fsync)
	return im, err
}

// runImpact runs the load for impactBefore, then during move(), and fills
// in the figures. extra returns the round trips beyond one per op (or the
// total round trips, for Redis, from which ops are subtracted) and reloads.
func runImpact(ctx context.Context, l *load, move func() (time.Duration, error), extra func() (int64, int64)) (impact, error) {
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	l.setPhase("warmup")
	go func() { l.run(lctx); close(done) }()
	time.Sleep(500 * time.Millisecond) // connections dialed, maps loaded: not measured
	l.setPhase("before")
	time.Sleep(impactBefore)
	l.setPhase("during")
	t0, r0 := extra()
	ops0 := l.ops.Load()
	d, err := move()
	l.setPhase("after")
	stop()
	<-done
	var im impact
	l.fill(&im)
	t1, r1 := extra()
	im.moveTook = d
	im.extraTrips = t1 - t0
	im.reloads = r1 - r0
	_ = ops0
	return im, err
}

func printImpact(w io.Writer, durable, nosync, peer impact) {
	fmt.Fprintf(w, "### 4. Client impact during a move\n\n")
	fmt.Fprintf(w, "One client, %d ops/s open loop (at most 64 in flight), half GET half SET of 100 B, on %d keys of the moving slot (the 100 B dataset of item 2); "+
		"%v of steady state (\"before\"), then from the start to the end of the move (\"during\"). Errors are what the application saw. "+
		"Extra round trips during the move: ours = redirects and FENCED retries followed (one KV request each) + map fetches from slotd; "+
		"Redis = requests go-redis sent to nodes (a pipeline counts once; ASKING+command is one pipeline) minus the application's ops, counted by a hook on every node client, CLUSTER SLOTS reloads included. "+
		"Redis moves with `--cluster-pipeline 10` (redis-cli's default) and fsyncs nothing; ours once with slotkv durable (every SET fsynced before it is acknowledged) and once with fsync off. "+
		"Ratio = Redis / ours.\n\n", impactRate, impactKeys, impactBefore)
	for _, v := range []struct {
		mode string
		im   impact
	}{{"durable", durable}, {"fsync off", nosync}} {
		ours := v.im
		rows := []row{
			{"ours " + v.mode + ": move duration under the client", fmtDur(ours.moveTook), fmtDur(peer.moveTook), ratio(peer.moveTook.Seconds(), ours.moveTook.Seconds()), ours.cmd + "; " + peer.cmd + "; `cd bench && go run ./cmd/cluster -items 2,4`"},
			{"ours " + v.mode + ": errors seen by the application, before / during", fmt.Sprintf("%d / %d", ours.errsBefore, ours.errsDuring), fmt.Sprintf("%d / %d", peer.errsBefore, peer.errsDuring), "-", "same"},
			{"ours " + v.mode + ": latency before the move, p50 / p99", fmtDur(ours.p50b) + " / " + fmtDur(ours.p99b), fmtDur(peer.p50b) + " / " + fmtDur(peer.p99b), ratio(peer.p99b.Seconds(), ours.p99b.Seconds()) + " (p99)", "same"},
			{"ours " + v.mode + ": latency during the move, p50 / p99 / max", fmtDur(ours.p50d) + " / " + fmtDur(ours.p99d) + " / " + fmtDur(ours.maxDuring), fmtDur(peer.p50d) + " / " + fmtDur(peer.p99d) + " / " + fmtDur(peer.maxDuring), ratio(peer.p99d.Seconds(), ours.p99d.Seconds()) + " (p99)", "same"},
			{"ours " + v.mode + ": redirects answered during the move", fmt.Sprintf("%d (%s)", ours.redirects, ours.detail), fmt.Sprintf("%d (%s)", peer.redirects, peer.detail), "-", "same"},
			{"ours " + v.mode + ": extra round trips during the move", fmt.Sprintf("%d", ours.extraTrips), fmt.Sprintf("%d", peer.extraTrips), ratio(float64(peer.extraTrips), float64(ours.extraTrips)), "same"},
			{"ours " + v.mode + ": ops completed (ticks skipped: 64 in flight)", fmt.Sprintf("%d (%d)", ours.ops, ours.missed), fmt.Sprintf("%d (%d)", peer.ops, peer.missed), "-", "same"},
		}
		printTable(w, rows)
		if ours.firstErr != "" {
			fmt.Fprintf(w, "First error, ours %s: %q.\n\n", v.mode, ours.firstErr)
		}
	}
	if peer.firstErr != "" {
		fmt.Fprintf(w, "First error, Redis: %q.\n\n", peer.firstErr)
	}
}
