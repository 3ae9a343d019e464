// Command routing measures key -> owner lookup of slotd's SDK against the Go
// ring libraries an application would otherwise embed, and prints a
// Markdown section for bench/RESULTS.md (item 1).
//
// Every case runs in the same process, in rounds: each round runs every case
// once with testing.Benchmark, starting one case further along than the
// round before, so that a burst of noise on this shared machine spreads over
// all cases instead of landing on one. The figure kept is the median over
// rounds. Ratios are peer / ours: above 1 means slotd's SDK is faster.
//
// Route's target (within 1.5x of the bare hash at 10 and 1,000 nodes in
// every run) is measured side by side as well: pairs of short
// chunks, one of the floor and one of Route, the ratio taken within each
// pair (measurePaired). The same rounds also run Route and the floor from
// 1, 2 and 4 goroutines at once (ns/op per goroutine). The paired ratio is
// also measured, with fewer pairs (-keypairs), on keys of other lengths
// (8 to 64 bytes) and with a hash tag (otherKeySets): the target is stated
// for the 16-byte keys, and those rows show what other keys get.
//
//	cd bench && go run ./cmd/routing -rounds 7 -benchtime 250ms
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
	jump "github.com/dgryski/go-jump"
	maglev "github.com/dgryski/go-maglev"
	rendezvous "github.com/dgryski/go-rendezvous"
	"github.com/golang/groupcache/consistenthash"
	"github.com/serialx/hashring"
	stathat "github.com/stathat/consistent"

	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/ringcompat"
	"github.com/slotd/slotd/slots"
)

const (
	vnodes  = 128     // points per node, for every ring that takes a count
	keyLen  = 16      // bytes per key
	numKeys = 1 << 14 // distinct keys cycled through: 256 KiB, more than L1 holds
	ours    = "slotd SDK: client.Route"
	floor   = "floor: xxhash64 of the key"
)

// Sinks keep the compiler from dropping the lookups.
var (
	sinkS string
	sinkU uint64
)

type benchCase struct {
	name string
	peer bool   // another project's library (the targets compare against these)
	note string // how the case is configured
	fn   func(b *testing.B)
	par  int // goroutines at once, for the item-6 rows; 0 in the main table
}

type result struct {
	nsPerOp []float64
	cpuNs   []float64 // goroutine rows: CPU time per lookup per goroutine
	allocs  int64
}

func main() {
	testing.Init()
	rounds := flag.Int("rounds", 7, "rounds; each runs every case once, interleaved")
	benchtime := flag.String("benchtime", "250ms", "time per case per round")
	nodeList := flag.String("nodes", "10,1000", "node counts, comma-separated")
	pairs := flag.Int("pairs", 2000, "item 6: floor/Route pairs of one pass over the keys each")
	blocks := flag.Int("blocks", 10, "item 6: blocks the pairs are cut into, each judged on its own")
	keyPairs := flag.Int("keypairs", 500, "item 6, other key lengths: floor/Route pairs per key set")
	flag.Parse()
	if *pairs < 4 || *blocks < 1 || *pairs < *blocks {
		fail(fmt.Errorf("-pairs %d -blocks %d: want pairs >= 4 and pairs >= blocks >= 1", *pairs, *blocks))
	}
	if *keyPairs < 4 {
		fail(fmt.Errorf("-keypairs %d: want >= 4", *keyPairs))
	}
	keyBlocks := min(*blocks, *keyPairs/4)
	if err := flag.Set("test.benchtime", *benchtime); err != nil {
		fail(err)
	}
	var counts []int
	for f := range strings.SplitSeq(*nodeList, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			fail(fmt.Errorf("-nodes %q: want positive integers", *nodeList))
		}
		counts = append(counts, n)
	}
	command := "cd bench && go run ./cmd/routing " + strings.Join(os.Args[1:], " ")

	keys, skeys := makeKeys()
	otherSets := otherKeySets()
	loadBefore := loadAvg()
	out := os.Stdout
	fmt.Fprintf(out, "### 1. Routing: key -> owner\n\n")
	fmt.Fprintf(out, "%d-byte keys (`user:` and 11 digits, %d distinct, cycled), one goroutine, %d vnodes where a library takes a count; "+
		"median ns/op over %d interleaved rounds of `testing.Benchmark` (%s each). Ratio = peer / ours: above 1, slotd is faster. "+
		"Command: `%s`.\n\n", keyLen, numKeys, vnodes, *rounds, *benchtime, strings.TrimSpace(command))
	fmt.Fprintln(out, "| case | ours (ns/op, allocs) | peer (ns/op, allocs) | ratio peer/ours | command |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	var notes []string
	var buildRows, checks, item6, item6Rows, parRows, keyRows, minimalRows []string
	for _, n := range counts {
		start := time.Now()
		cases, loops, build, c, closeAll, err := setup(n, keys, skeys)
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "routing: %d nodes: setup took %v\n", n, time.Since(start).Round(time.Millisecond))
		res := run(cases, *rounds)
		p := measurePaired(loops.floor, loops.ours, *pairs, *blocks)
		minimalRows = append(minimalRows, minimalRow(n, measurePaired(loops.minimal, loops.ours, *pairs, *blocks)))
		fmt.Fprintf(os.Stderr, "routing: %d nodes: %d pairs done\n", n, *pairs)
		for _, set := range otherSets {
			l := makeLoops(c, set.keys)
			keyRows = append(keyRows, keySetRow(n, set, measurePaired(l.floor, l.ours, *keyPairs, keyBlocks)))
		}
		fmt.Fprintf(os.Stderr, "routing: %d nodes: %d key sets done\n", n, len(otherSets))
		closeAll()
		checks = append(checks, report(out, n, cases, res, p, strings.TrimSpace(command)))
		var b6, bp strings.Builder
		item6 = append(item6, reportItem6(&b6, n, p))
		item6Rows = append(item6Rows, strings.TrimRight(b6.String(), "\n"))
		goroutineRows(&bp, n, cases, res)
		parRows = append(parRows, strings.TrimRight(bp.String(), "\n"))
		for _, c := range cases {
			if d, ok := build[c.name]; ok {
				buildRows = append(buildRows, fmt.Sprintf("| %s | %s | %s |", fmtInt(n), c.name, fmtDur(d)))
			}
		}
		if len(notes) == 0 {
			for _, c := range cases {
				if c.note != "" && c.par == 0 {
					notes = append(notes, fmt.Sprintf("- %s: %s", c.name, c.note))
				}
			}
		}
	}
	fmt.Fprintf(out, "\nAgainst the routing targets (faster than every peer at 1,000 nodes, within 1.5x of the bare hash, 0 allocs):\n\n%s\n", strings.Join(checks, "\n"))

	procs, cpus := gomaxprocs()
	fmt.Fprintf(out, "\n#### Route within 1.5x of the bare hash at 10 and 1,000 nodes in every run\n\n"+
		"Measured side by side: %d pairs of chunks, each chunk one timed pass over the %d keys (about 0.1 ms) after an untimed one, one chunk of the floor "+
		"(`xxhash.Sum64(key)`) and one of `client.Route(key)` then `Owner()`, back to back in alternating order, in the same loop "+
		"over the same keys (each loop adds a word of every result to a local sum: the hash, or the owner's length). "+
		"The ratio is taken within each pair, so a burst of load on this shared machine lands on both sides of it; the "+
		"figure is the median over pairs. The pairs are cut into %d blocks, each a short run of its own, and the target "+
		"counts as met only when every block's median is within 1.5x. Load average %s before, %s after. Command: `%s`.\n\n",
		*pairs, numKeys, *blocks, loadBefore, loadAvg(), strings.TrimSpace(command))
	fmt.Fprintln(out, "| nodes | pairs | floor (median ns/op) | Route (median ns/op) | Route / floor (median of pairs) | quartiles | worst block |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|")
	fmt.Fprintf(out, "%s\n\n%s\n", strings.Join(item6Rows, "\n"), strings.Join(item6, "\n"))
	printMinimal(out, minimalRows, *pairs, *blocks, strings.TrimSpace(command))
	fmt.Fprintf(out, "\nOther keys: the same paired measurement, %d pairs in %d blocks per key set, each set %d distinct keys of one length, "+
		"the floor being `xxhash.Sum64` of the same keys in the same loop. Target: Route within %gx of that floor in every block for the "+
		"keys longer than 16 bytes and the hash-tagged ones; none is stated for the 8- and 12-byte keys, and the 16-byte keys' "+
		"targets are the two above. Route hashes keys of 8 to 16 bytes with no byte >= '{' "+
		"itself (inline); other keys go to `slots.ForKey`, which tests keys of 17 to 64 bytes for a byte >= '{' as blocks of "+
		"16 bytes (inline, no loop) and hashes those without one with `xxhash.Sum64`; a key with a hash tag has its '{' "+
		"looked for in its first word, then `bytes.IndexByte`, its '}' with `bytes.IndexByte`, and its tag hashed with `xxhash.Sum64`.\n\n", *keyPairs, keyBlocks, numKeys, float64(longKeyTarget))
	fmt.Fprintln(out, "| nodes | keys | example | Route's path | floor (median ns/op) | Route (median ns/op) | Route / floor (median of pairs) | quartiles | worst block | target in every block |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|")
	fmt.Fprintln(out, strings.Join(keyRows, "\n"))
	fmt.Fprintf(out, "\nRoute from several goroutines at once on one Client (and the floor, the same way, for reference): each goroutine "+
		"runs b.N lookups from its own offset into the keys, so ns/op is per goroutine; median over the %d rounds above. "+
		"GOMAXPROCS %d on %d CPUs: up to %d goroutines each have a core, and a per-goroutine ns/op at the one-goroutine "+
		"figure means they do not contend (Route writes no shared memory); beyond that they take turns on the cores, so "+
		"per-goroutine ns/op grows with goroutines / GOMAXPROCS from time-sharing alone, and the total (M routes/s, all "+
		"goroutines) is the figure to read. On a machine shared with other work, that work competes for the cores too; "+
		"the CPU columns (each goroutine's thread CPU clock around its loop, mean over goroutines) leave out time spent "+
		"waiting for a core, so they stay at the one-goroutine figure unless the goroutines slow each other down.\n\n",
		*rounds, procs, cpus, procs)
	fmt.Fprintln(out, "| nodes | goroutines | Route ns/op per goroutine | Route CPU ns/op per goroutine | M routes/s, all goroutines | vs 1 goroutine | floor ns/op per goroutine | floor CPU ns/op per goroutine | Route / floor (CPU when measured) |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|")
	fmt.Fprintln(out, strings.Join(parRows, "\n"))
	fmt.Fprintf(out, "\nHow each case is set up:\n\n%s\n", strings.Join(notes, "\n"))
	fmt.Fprintf(out, "\nBuild time of each structure (one run, not interleaved; informational: what a membership change "+
		"costs a library that rebuilds; for the SDK, computing the bootstrap table and building the map, which in "+
		"production slotd does once and clients receive):\n\n| nodes | case | build |\n|---|---|---|\n%s\n", strings.Join(buildRows, "\n"))
}

// makeKeys returns the same keys as bytes and as strings, so that libraries
// taking strings are not charged for a conversion.
func makeKeys() ([][]byte, []string) {
	rng := rand.New(rand.NewPCG(1, 2)) // fixed: every run looks up the same keys
	keys := make([][]byte, numKeys)
	skeys := make([]string, numKeys)
	for i := range keys {
		skeys[i] = fmt.Sprintf("user:%011d", rng.Uint64N(1e11))
		keys[i] = []byte(skeys[i])
	}
	return keys, skeys
}

type member string

func (m member) String() string { return string(m) }

type xxHasher struct{}

func (xxHasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// setup builds every structure outside the timed loops; testing.Benchmark
// calls a case several times while it sizes b.N. It also returns the loops
// of the floor and of Route, for the item-6 pairs.
func setup(n int, keys [][]byte, skeys []string) ([]benchCase, item6Loops, map[string]time.Duration, *client.Client, func(), error) {
	names := make([]string, n)
	rnodes := make([]ringcompat.Node, n)
	members := make([]consistent.Member, n)
	weights := make(map[string]int, n)
	for i := range names {
		names[i] = "node-" + strconv.Itoa(i)
		rnodes[i] = ringcompat.Node{ID: names[i], Weight: 1}
		members[i] = member(names[i])
		weights[names[i]] = vnodes
	}
	const mask = numKeys - 1

	const peer = true
	// Build every structure once, timing it: the cost of a membership
	// change for the libraries that rebuild.
	build := map[string]time.Duration{}
	timed := func(name string, f func()) {
		start := time.Now()
		f()
		build[name] = time.Since(start)
	}
	var (
		sm   *slotmap.Map
		ring *ringcompat.Ring
		bc   *consistent.Consistent
		sx   *hashring.HashRing
		st   *stathat.Consistent
		gc   *consistenthash.Map
		rv   *rendezvous.Rendezvous
		mg   *maglev.Table
		err  error
	)
	timed(ours, func() { sm, err = bootstrapMap(names) })
	if err != nil {
		return nil, item6Loops{}, nil, nil, nil, err
	}
	timed("slotd ringcompat.Ring", func() { ring, err = ringcompat.New(ringcompat.Config{}, rnodes...) })
	if err != nil {
		return nil, item6Loops{}, nil, nil, nil, err
	}
	timed("buraksezer/consistent", func() {
		bc = consistent.New(members, consistent.Config{PartitionCount: 7919, ReplicationFactor: vnodes, Load: 1.25, Hasher: xxHasher{}})
	})
	timed("serialx/hashring", func() { sx = hashring.NewWithWeights(weights) })
	timed("stathat/consistent", func() {
		st = stathat.New()
		st.NumberOfReplicas = vnodes
		st.Set(names)
	})
	timed("groupcache/consistenthash", func() {
		gc = consistenthash.New(vnodes, nil)
		gc.Add(names...)
	})
	timed("dgryski/go-rendezvous", func() { rv = rendezvous.New(names, xxhash.Sum64String) })
	m := uint64(maglev.SmallM)
	if n*100 > maglev.SmallM {
		m = maglev.BigM
	}
	timed("dgryski/go-maglev", func() { mg = maglev.New(names, m) })
	minimal := new(atomic.Pointer[slotTable])
	minimal.Store(newSlotTable(sm, names))
	sdk, err := startSDK(sm)
	if err != nil {
		return nil, item6Loops{}, nil, nil, nil, fmt.Errorf("start the SDK client: %w", err)
	}
	loops := makeLoops(sdk.Client, keys)
	loops.minimal = minimalLoop(minimal, keys)

	cases := []benchCase{
		{name: floor, note: "`xxhash.Sum64(key)`: no owner, the cost of hashing alone (summed into a local, like the SDK case)", fn: func(b *testing.B) {
			sinkU += loops.floor(b.N, 0)
		}},
		{name: ours, note: "`(*client.Client).Route(key)` then `Owner()` (its length summed into a local), on a Client fed by an in-process Directory server with the bootstrap map (16,384 slots)", fn: func(b *testing.B) {
			sinkU += loops.ours(b.N, 0)
		}},
		{name: minimalName, peer: !peer, note: "`p.Load()` of an `atomic.Pointer` to `{owners [16384]uint16; names []string}`, then `names[owners[slots.ForKey(key)]]` (its length summed into a local): the least an SDK routing by slot through slots.ForKey can do, for comparison with client.Route", fn: func(b *testing.B) {
			sinkU += loops.minimal(b.N, 0)
		}},
		{name: "slot function only: slots.ForKey", peer: !peer, note: "`slots.ForKey(key)`: hash tag scan + xxhash64, no owner (summed into a local); the part of the SDK's cost that is the slot function", fn: func(b *testing.B) {
			var sum uint64
			for i := 0; i < b.N; i++ {
				sum += uint64(slots.ForKey(keys[i&mask]).Uint16())
			}
			sinkU += sum
		}},
		{name: "slotd ringcompat.Ring", peer: !peer, note: "`Lookup(key)`, xxhash, 128 vnodes, Eytzinger layout", fn: func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS, _ = ring.Lookup(keys[i&mask])
			}
		}},
		{name: "buraksezer/consistent", peer: peer, note: "`LocateKey(key)`, xxhash, 7,919 partitions, replication 128, load 1.25", fn: func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS = bc.LocateKey(keys[i&mask]).String()
			}
		}},
		{name: "serialx/hashring", peer: peer, note: "`GetNode(key)`, its default md5, weight 128 per node (one point per weight unit)", fn: func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS, _ = sx.GetNode(skeys[i&mask])
			}
		}},
		{name: "stathat/consistent", peer: peer, note: "`Get(key)`, its crc32, NumberOfReplicas 128", fn: func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS, _ = st.Get(skeys[i&mask])
			}
		}},
		{name: "groupcache/consistenthash", peer: peer, note: "`Get(key)`, its crc32, 128 replicas", fn: func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS = gc.Get(skeys[i&mask])
			}
		}},
		{name: "dgryski/go-jump", peer: peer, note: "`names[jump.Hash(xxhash.Sum64(key), n)]` (no vnodes)", fn: func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS = names[jump.Hash(xxhash.Sum64(keys[i&mask]), n)]
			}
		}},
		{name: "dgryski/go-rendezvous", peer: peer, note: "`Lookup(key)` with `xxhash.Sum64String` (no vnodes; O(n) per lookup)", fn: func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS = rv.Lookup(skeys[i&mask])
			}
		}},
		{name: "dgryski/go-maglev", peer: peer, note: "`names[t.Lookup(xxhash.Sum64(key))]`, table size M = SmallM (65,537) up to 655 nodes, else BigM (655,373): M >= 100 n", fn: func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS = names[mg.Lookup(xxhash.Sum64(keys[i&mask]))]
			}
		}},
	}
	for _, g := range goroutineCounts {
		cases = append(cases,
			benchCase{name: parName(ours, g), fn: parallel(g, loops.ours), par: g},
			benchCase{name: parName(floor, g), fn: parallel(g, loops.floor), par: g})
	}
	return cases, loops, build, sdk.Client, sdk.Close, nil
}

// item6Loops are the loops Route's targets compare: within 1.5x of the
// bare hash (floor), within 1.1x of the minimal slot table (minimal; set
// by setup, for the 16-byte keys alone).
type item6Loops struct{ floor, ours, minimal loop }

// makeLoops returns the floor and Route as loops (see loop) over keys
// (numKeys of them): the same shape, the same keys.
//
// Not inlined, so that the loops are compiled as closures of their own
// with Route's callees inlined as an application's loop has them: inlined
// into setup and main, the copies of the closures were not analysed for
// inlining again (golang/go#81380) and called Route.Owner out of line on
// every lookup, a cost of the bench's layout that no application pays
// (Route/floor 1.31-1.48 -> 1.25-1.39 at 10 nodes).
//
//go:noinline
func makeLoops(c *client.Client, keys [][]byte) item6Loops {
	const mask = numKeys - 1
	return item6Loops{
		floor: func(n, off int) uint64 {
			var sum uint64
			for i := 0; i < n; i++ {
				sum += xxhash.Sum64(keys[(i+off)&mask])
			}
			return sum
		},
		ours: func(n, off int) uint64 {
			var sum uint64
			for i := 0; i < n; i++ {
				r, err := c.Route(keys[(i+off)&mask])
				if err != nil {
					fail(err)
				}
				sum += uint64(len(r.Owner()))
			}
			return sum
		},
	}
}

// run runs every case once per round, each round starting one case later.
func run(cases []benchCase, rounds int) []result {
	res := make([]result, len(cases))
	for r := range rounds {
		for j := range cases {
			k := (r + j) % len(cases)
			br := testing.Benchmark(cases[k].fn)
			if br.N == 0 {
				fail(fmt.Errorf("case %s failed", cases[k].name))
			}
			res[k].nsPerOp = append(res[k].nsPerOp, float64(br.T.Nanoseconds())/float64(br.N))
			res[k].allocs = max(res[k].allocs, br.AllocsPerOp())
			if v, ok := br.Extra[cpuMetric]; ok {
				res[k].cpuNs = append(res[k].cpuNs, v)
			}
		}
		fmt.Fprintf(os.Stderr, "routing: round %d/%d done\n", r+1, rounds)
	}
	return res
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// report prints the rows for n nodes and returns the check against the
// routing targets: faster than every peer, within 1.5x of the bare hash
// (the paired ratio p, measured side by side), no allocation.
func report(w io.Writer, n int, cases []benchCase, res []result, p pairedResult, command string) string {
	oursAt := slices.IndexFunc(cases, func(c benchCase) bool { return c.name == ours })
	floorAt := slices.IndexFunc(cases, func(c benchCase) bool { return c.name == floor })
	o := median(res[oursAt].nsPerOp)
	oursCol := fmt.Sprintf("%.1f ns, %d allocs", o, res[oursAt].allocs)
	best, bestNs := "", 0.0
	for i, c := range cases {
		if i == oursAt || c.par > 0 {
			continue
		}
		p := median(res[i].nsPerOp)
		fmt.Fprintf(w, "| %s nodes: %s | %s | %.1f ns, %d allocs | %.2f | `%s` |\n",
			fmtInt(n), c.name, oursCol, p, res[i].allocs, p/o, command)
		if c.peer && (best == "" || p < bestNs) {
			best, bestNs = c.name, p
		}
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	f := median(res[floorAt].nsPerOp)
	return fmt.Sprintf("- %s nodes: fastest peer %s at %.1f ns vs ours %.1f ns (faster than every peer: %s); "+
		"ours / bare xxhash64 = %.2f measured side by side (item 6 below; %.2f from the medians above) (within 1.5x: %s); allocs %d (0: %s).",
		fmtInt(n), best, bestNs, o, verdict(o < bestNs), p.ratio, o/f, verdict(p.ratio <= 1.5), res[oursAt].allocs, verdict(res[oursAt].allocs == 0))
}

func fmtInt(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "routing:", err)
	os.Exit(1)
}
