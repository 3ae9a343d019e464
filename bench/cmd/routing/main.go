// Command routing measures key -> owner lookup of slotd's SDK against the Go
// ring libraries an application would otherwise embed (issue 10, item 1), and
// prints a Markdown section for bench/RESULTS.md.
//
// Every case runs in the same process, in rounds: each round runs every case
// once with testing.Benchmark, starting one case further along than the
// round before, so that a burst of noise on this shared machine spreads over
// all cases instead of landing on one. The figure kept is the median over
// rounds. Ratios are peer / ours: above 1 means slotd's SDK is faster.
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
	sinkS    string
	sinkU    uint64
	sinkSlot slots.Slot
)

type benchCase struct {
	name string
	peer bool   // another project's library (the targets compare against these)
	note string // how the case is configured
	fn   func(b *testing.B)
}

type result struct {
	nsPerOp []float64
	allocs  int64
}

func main() {
	testing.Init()
	rounds := flag.Int("rounds", 7, "rounds; each runs every case once, interleaved")
	benchtime := flag.String("benchtime", "250ms", "time per case per round")
	nodeList := flag.String("nodes", "10,1000", "node counts, comma-separated")
	flag.Parse()
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
	out := os.Stdout
	fmt.Fprintf(out, "### 1. Routing: key -> owner\n\n")
	fmt.Fprintf(out, "%d-byte keys (`user:` and 11 digits, %d distinct, cycled), one goroutine, %d vnodes where a library takes a count; "+
		"median ns/op over %d interleaved rounds of `testing.Benchmark` (%s each). Ratio = peer / ours: above 1, slotd is faster. "+
		"Command: `%s`.\n\n", keyLen, numKeys, vnodes, *rounds, *benchtime, strings.TrimSpace(command))
	fmt.Fprintln(out, "| case | ours (ns/op, allocs) | peer (ns/op, allocs) | ratio peer/ours | command |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	var notes []string
	var buildRows, checks []string
	for _, n := range counts {
		start := time.Now()
		cases, build, closeAll, err := setup(n, keys, skeys)
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "routing: %d nodes: setup took %v\n", n, time.Since(start).Round(time.Millisecond))
		res := run(cases, *rounds)
		closeAll()
		checks = append(checks, report(out, n, cases, res, strings.TrimSpace(command)))
		for _, c := range cases {
			if d, ok := build[c.name]; ok {
				buildRows = append(buildRows, fmt.Sprintf("| %s | %s | %s |", fmtInt(n), c.name, fmtDur(d)))
			}
		}
		if len(notes) == 0 {
			for _, c := range cases {
				if c.note != "" {
					notes = append(notes, fmt.Sprintf("- %s: %s", c.name, c.note))
				}
			}
		}
	}
	fmt.Fprintf(out, "\nAgainst the targets of issue 10 (faster than every peer at 1,000 nodes, within 1.5x of the bare hash, 0 allocs):\n\n%s\n", strings.Join(checks, "\n"))
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
// calls a case several times while it sizes b.N.
func setup(n int, keys [][]byte, skeys []string) ([]benchCase, map[string]time.Duration, func(), error) {
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
		return nil, nil, nil, err
	}
	timed("slotd ringcompat.Ring", func() { ring, err = ringcompat.New(ringcompat.Config{}, rnodes...) })
	if err != nil {
		return nil, nil, nil, err
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
		return nil, nil, nil, fmt.Errorf("start the SDK client: %w", err)
	}

	cases := []benchCase{
		{floor, !peer, "`xxhash.Sum64(key)`: no owner, the cost of hashing alone", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkU = xxhash.Sum64(keys[i&mask])
			}
		}},
		{ours, !peer, "`(*client.Client).Route(key)` then `Owner()`, on a Client fed by an in-process Directory server with the bootstrap map (16,384 slots)", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r, err := sdk.Route(keys[i&mask])
				if err != nil {
					b.Fatal(err)
				}
				sinkS = r.Owner()
			}
		}},
		{"minimal slot table: slots.ForKey + atomic.Pointer", !peer, "`p.Load()` of an `atomic.Pointer` to `{owners [16384]uint16; names []string}`, then `names[owners[slots.ForKey(key)]]`: the least an SDK routing by slot can do, for comparison with client.Route", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				t := minimal.Load()
				sinkS = t.names[t.owners[slots.ForKey(keys[i&mask]).Uint16()&(slots.Count-1)]]
			}
		}},
		{"slot function only: slots.ForKey", !peer, "`slots.ForKey(key)`: hash tag scan + xxhash64, no owner; the part of the SDK's cost that is the slot function", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkSlot = slots.ForKey(keys[i&mask])
			}
		}},
		{"slotd ringcompat.Ring", !peer, "`Lookup(key)`, xxhash, 128 vnodes, Eytzinger layout", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS, _ = ring.Lookup(keys[i&mask])
			}
		}},
		{"buraksezer/consistent", peer, "`LocateKey(key)`, xxhash, 7,919 partitions, replication 128, load 1.25", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS = bc.LocateKey(keys[i&mask]).String()
			}
		}},
		{"serialx/hashring", peer, "`GetNode(key)`, its default md5, weight 128 per node (one point per weight unit)", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS, _ = sx.GetNode(skeys[i&mask])
			}
		}},
		{"stathat/consistent", peer, "`Get(key)`, its crc32, NumberOfReplicas 128", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS, _ = st.Get(skeys[i&mask])
			}
		}},
		{"groupcache/consistenthash", peer, "`Get(key)`, its crc32, 128 replicas", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS = gc.Get(skeys[i&mask])
			}
		}},
		{"dgryski/go-jump", peer, "`names[jump.Hash(xxhash.Sum64(key), n)]` (no vnodes)", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS = names[jump.Hash(xxhash.Sum64(keys[i&mask]), n)]
			}
		}},
		{"dgryski/go-rendezvous", peer, "`Lookup(key)` with `xxhash.Sum64String` (no vnodes; O(n) per lookup)", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS = rv.Lookup(skeys[i&mask])
			}
		}},
		{"dgryski/go-maglev", peer, "`names[t.Lookup(xxhash.Sum64(key))]`, table size M = SmallM (65,537) up to 655 nodes, else BigM (655,373): M >= 100 n", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sinkS = names[mg.Lookup(xxhash.Sum64(keys[i&mask]))]
			}
		}},
	}
	return cases, build, sdk.Close, nil
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

// slotTable is the smallest routing table by slot: an owner index per slot.
type slotTable struct {
	owners [slots.Count]uint16
	names  []string
}

func newSlotTable(m *slotmap.Map, names []string) *slotTable {
	t := &slotTable{names: names}
	index := make(map[string]uint16, len(names))
	for i, n := range names {
		index[n] = uint16(i)
	}
	for s := range slots.Count {
		t.owners[s] = index[m.OwnerID(slots.MustNew(s))]
	}
	return t
}

// report prints the rows for n nodes and returns the check against the
// targets of issue 10: faster than every peer, within 1.5x of the bare
// hash, no allocation.
func report(w io.Writer, n int, cases []benchCase, res []result, command string) string {
	oursAt := slices.IndexFunc(cases, func(c benchCase) bool { return c.name == ours })
	floorAt := slices.IndexFunc(cases, func(c benchCase) bool { return c.name == floor })
	o := median(res[oursAt].nsPerOp)
	oursCol := fmt.Sprintf("%.1f ns, %d allocs", o, res[oursAt].allocs)
	best, bestNs := "", 0.0
	for i, c := range cases {
		if i == oursAt {
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
		"ours / bare xxhash64 = %.2f (within 1.5x: %s); allocs %d (0: %s).",
		fmtInt(n), best, bestNs, o, verdict(o < bestNs), o/f, verdict(o/f <= 1.5), res[oursAt].allocs, verdict(res[oursAt].allocs == 0))
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
