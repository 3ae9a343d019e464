package ringcompat

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hashModes are the configurations the exact properties must hold for.
var hashModes = []struct {
	name string
	cfg  Config
	id   func(i int) string
}{
	{"xxhash", Config{Hash: XXHash, VNodes: 64}, func(i int) string { return "node-" + strconv.Itoa(i) }},
	{"seed000", Config{Hash: Seed000, VNodes: 64}, strconv.Itoa},
	{"md5 strict", Config{Hash: MD5, VNodes: 64, StrictSuccessor: true}, func(i int) string { return "server" + strconv.Itoa(i) }},
	{"few vnodes", Config{Hash: XXHash, VNodes: 1}, func(i int) string { return "n" + strconv.Itoa(i) }},
}

func testKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key:" + strconv.Itoa(i)
	}
	return keys
}

func mustNew(t testing.TB, cfg Config, nodes ...Node) *Ring {
	t.Helper()
	r, err := New(cfg, nodes...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func owners(r *Ring, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i], _ = r.LookupString(k)
	}
	return out
}

// TestRemoveMovesOnlyItsKeys and TestAddMovesOnlyOntoNew are the ring's
// exact properties: zero keys of surviving nodes change hands on a removal, and
// every key that moves on an addition lands on the newcomer.
func TestRemoveMovesOnlyItsKeys(t *testing.T) {
	keys := testKeys(20_000)
	for _, m := range hashModes {
		t.Run(m.name, func(t *testing.T) {
			var nodes []Node
			for i := range 8 {
				nodes = append(nodes, Node{ID: m.id(i), Weight: 1 + i%3})
			}
			r := mustNew(t, m.cfg, nodes...)
			before := owners(r, keys)
			for _, gone := range nodes {
				smaller, err := r.Remove(gone.ID)
				if err != nil {
					t.Fatal(err)
				}
				after := owners(smaller, keys)
				moved := 0
				for i := range keys {
					if before[i] == gone.ID {
						moved++
						if after[i] == gone.ID {
							t.Fatalf("key %s still on removed node %s", keys[i], gone.ID)
						}
					} else if after[i] != before[i] {
						t.Fatalf("removing %s moved key %s from %s to %s", gone.ID, keys[i], before[i], after[i])
					}
				}
				if moved == 0 {
					t.Fatalf("node %s owned no key; the test proves nothing", gone.ID)
				}
			}
		})
	}
}

func TestAddMovesOnlyOntoNew(t *testing.T) {
	keys := testKeys(20_000)
	for _, m := range hashModes {
		t.Run(m.name, func(t *testing.T) {
			var nodes []Node
			for i := range 8 {
				nodes = append(nodes, Node{ID: m.id(i), Weight: 1})
			}
			r := mustNew(t, m.cfg, nodes...)
			before := owners(r, keys)
			for i := 8; i < 11; i++ {
				added := Node{ID: m.id(i), Weight: 1 + i%2}
				bigger, err := r.Add(added)
				if err != nil {
					t.Fatal(err)
				}
				after := owners(bigger, keys)
				moved := 0
				for j := range keys {
					if after[j] != before[j] {
						moved++
						if after[j] != added.ID {
							t.Fatalf("adding %s moved key %s from %s to %s", added.ID, keys[j], before[j], after[j])
						}
					}
				}
				if moved == 0 {
					t.Fatalf("adding %s moved nothing; the test proves nothing", added.ID)
				}
			}
		})
	}
}

// TestBuildOrderIndependent: the same node set gives the same ring in any
// order, whether built at once or by any sequence of Add and Remove.
func TestBuildOrderIndependent(t *testing.T) {
	for _, m := range hashModes {
		t.Run(m.name, func(t *testing.T) {
			var nodes []Node
			for i := range 12 {
				nodes = append(nodes, Node{ID: m.id(i), Weight: 1 + i%4, Zone: "z" + strconv.Itoa(i%3)})
			}
			want := mustNew(t, m.cfg, nodes...)
			rng := rand.New(rand.NewPCG(4, 4))
			for range 5 {
				shuffled := slices.Clone(nodes)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				sameRing(t, want, mustNew(t, m.cfg, shuffled...))

				// Grow one node at a time with an extra node added and removed on the way.
				r := mustNew(t, m.cfg)
				var err error
				for i, n := range shuffled {
					if r, err = r.Add(n); err != nil {
						t.Fatal(err)
					}
					if i == 3 {
						extra := Node{ID: m.id(99), Weight: 2}
						if r, err = r.Add(extra); err != nil {
							t.Fatal(err)
						}
						if r, err = r.Remove(extra.ID); err != nil {
							t.Fatal(err)
						}
					}
				}
				sameRing(t, want, r)
			}
		})
	}
}

func sameRing(t *testing.T, want, got *Ring) {
	t.Helper()
	if !slices.Equal(want.keys, got.keys) || !slices.Equal(want.owners, got.owners) || !slices.Equal(want.nodes, got.nodes) {
		t.Fatal("rings built from the same node set differ")
	}
}

// TestSeed000Reference checks the Ring against a direct, naive transcription
// of the reference ring's Rust code on many keys, for lookup, replicas and bounded
// lookup, including uneven vnode counts and non-dense ids.
func TestSeed000Reference(t *testing.T) {
	type point struct {
		p uint64
		n uint32
	}
	ids := []uint32{0, 3, 7, 10, 11, 200, 4_000_000_000}
	var pts []point
	var nodes []Node
	for k, id := range ids {
		v := 1 + 17*k
		nodes = append(nodes, Node{ID: strconv.FormatUint(uint64(id), 10), Weight: v})
		le := []byte{byte(id), byte(id >> 8), byte(id >> 16), byte(id >> 24)}
		for i := range v {
			pts = append(pts, point{Mix(HashBytes(le) ^ Mix(uint64(i)+1)), id})
		}
	}
	slices.SortFunc(pts, func(a, b point) int {
		return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.n, b.n))
	})
	first := func(h uint64) int { // partition_point(p < h), wrapping
		for i, p := range pts {
			if p.p >= h {
				return i
			}
		}
		return 0
	}
	r := mustNew(t, Config{Hash: Seed000, VNodes: 1}, nodes...)
	load := make([]uint64, len(ids))
	for k := range 3000 {
		key := []byte("k" + strconv.Itoa(k))
		start := first(HashBytes(key))
		want := strconv.FormatUint(uint64(pts[start].n), 10)
		if got, _ := r.Lookup(key); got != want {
			t.Fatalf("Lookup(%s) = %s, want %s", key, got, want)
		}
		var walk []string
		for j := range pts {
			id := strconv.FormatUint(uint64(pts[(start+j)%len(pts)].n), 10)
			if !slices.Contains(walk, id) {
				walk = append(walk, id)
			}
		}
		if got := r.Replicas(key, 4); !slices.Equal(got, walk[:4]) {
			t.Fatalf("Replicas(%s, 4) = %v, want %v", key, got, walk[:4])
		}
		// Bounded: the first node on the walk below the cap; the load vector
		// follows Nodes order, which for seed000 is numeric id order.
		limit := BoundedCap(load, 0.25)
		wantB := ""
		for _, id := range walk {
			if i, _ := r.Index(id); load[i] < limit {
				wantB = id
				break
			}
		}
		got, err := r.LookupBounded(key, load, 0.25)
		if err != nil || got != wantB {
			t.Fatalf("LookupBounded(%s) = %s, %v; want %s", key, got, err, wantB)
		}
		i, _ := r.Index(got)
		load[i]++
	}
	// With eps = 0.25 no node ends above 1.25 x the average (the reference ring's bound).
	mean := 3000.0 / float64(len(ids))
	if hi := float64(slices.Max(load)); hi > math.Ceil(1.25*(mean+1)) {
		t.Errorf("bounded max load %.0f above 1.25 x mean %.1f", hi, mean)
	}
	t.Logf("bounded loads at eps 0.25 (weights 1..103): %v", load)
}

func TestBoundedCap(t *testing.T) {
	cases := []struct {
		load []uint64
		eps  float64
		want uint64
	}{
		{[]uint64{0}, 0, 1},
		{[]uint64{0, 0, 0, 0}, 0.25, 1},
		{[]uint64{10, 10, 10, 10, 10, 10, 10, 10, 10, 10}, 0.25, 13}, // ceil(1.25*101/10) = ceil(12.625)
		{[]uint64{3, 0}, 0, 2},
		{[]uint64{4, 4}, 0, 5}, // ceil(9/2)
		{[]uint64{5, 5, 5}, 1, 11},
	}
	for _, tc := range cases {
		if got := BoundedCap(tc.load, tc.eps); got != tc.want {
			t.Errorf("BoundedCap(%v, %v) = %d, want %d", tc.load, tc.eps, got, tc.want)
		}
	}
}

// TestBalance is the ring's statistical property: 128 vnodes, 10 nodes,
// 100,000 keys, most loaded node at most 1.15 x the mean, for every hash.
func TestBalance(t *testing.T) {
	keys := testKeys(100_000)
	for _, m := range hashModes {
		t.Run(m.name, func(t *testing.T) {
			var nodes []Node
			for i := range 10 {
				nodes = append(nodes, Node{ID: m.id(i), Weight: 1})
			}
			cfg := m.cfg
			cfg.VNodes = 128
			r := mustNew(t, cfg, nodes...)
			counts := map[string]int{}
			for _, k := range keys {
				id, _ := r.LookupString(k)
				counts[id]++
			}
			hi, lo := 0, math.MaxInt
			for _, c := range counts {
				hi, lo = max(hi, c), min(lo, c)
			}
			ratio := float64(hi) / 10_000
			t.Logf("%s, 10 nodes x 128 vnodes, 100000 keys: max/mean = %.4f, min/mean = %.4f", m.name, ratio, float64(lo)/10_000)
			if ratio > 1.15 {
				t.Errorf("max/mean = %.4f, want <= 1.15", ratio)
			}
		})
	}
}

// TestWeightedShare: vnodes proportional to weight give key shares
// proportional to weight, within the 128-vnode spread.
func TestWeightedShare(t *testing.T) {
	nodes := []Node{{ID: "w1", Weight: 1}, {ID: "w2", Weight: 2}, {ID: "w3", Weight: 3}, {ID: "w4", Weight: 4}}
	r := mustNew(t, Config{VNodes: 128}, nodes...)
	counts := map[string]int{}
	keys := testKeys(100_000)
	for _, k := range keys {
		id, _ := r.LookupString(k)
		counts[id]++
	}
	for _, n := range nodes {
		want := float64(len(keys)) * float64(n.Weight) / 10
		got := float64(counts[n.ID]) / want
		t.Logf("%s: %.4f of its weighted share", n.ID, got)
		if got < 0.85 || got > 1.15 {
			t.Errorf("node %s got %.4f of its weighted share, want within 15%%", n.ID, got)
		}
	}
}

func TestErrors(t *testing.T) {
	base := mustNew(t, Config{}, Node{ID: "a", Weight: 1})
	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"negative vnodes", func() error { _, err := New(Config{VNodes: -1}); return err }, ErrBadVNodes},
		{"empty id", func() error { _, err := New(Config{}, Node{Weight: 1}); return err }, ErrBadNodeID},
		{"zero weight", func() error { _, err := New(Config{}, Node{ID: "a"}); return err }, ErrBadWeight},
		{"duplicate", func() error { _, err := New(Config{}, Node{ID: "a", Weight: 1}, Node{ID: "a", Weight: 2}); return err }, ErrDuplicateNode},
		{"seed000 name", func() error { _, err := New(Config{Hash: Seed000}, Node{ID: "a", Weight: 1}); return err }, ErrBadNodeID},
		{"seed000 leading zero", func() error { _, err := New(Config{Hash: Seed000}, Node{ID: "07", Weight: 1}); return err }, ErrBadNodeID},
		{"seed000 too big", func() error { _, err := New(Config{Hash: Seed000}, Node{ID: "4294967296", Weight: 1}); return err }, ErrBadNodeID},
		{"too many points", func() error { _, err := New(Config{VNodes: MaxPoints}, Node{ID: "a", Weight: 2}); return err }, ErrTooManyPoints},
		{"add duplicate", func() error { _, err := base.Add(Node{ID: "a", Weight: 3}); return err }, ErrDuplicateNode},
		{"remove unknown", func() error { _, err := base.Remove("zz"); return err }, ErrUnknownNode},
		{"unknown hash", func() error { _, err := HashByName("sha1"); return err }, ErrUnknownHash},
		{"short load", func() error { _, err := base.LookupBounded([]byte("k"), nil, 0.25); return err }, ErrBadLoad},
		{"negative eps", func() error { _, err := base.LookupBounded([]byte("k"), []uint64{0}, -1); return err }, ErrBadLoad},
		{"NaN eps", func() error { _, err := base.LookupBounded([]byte("k"), []uint64{0}, math.NaN()); return err }, ErrBadLoad},
		{"bounded on empty ring", func() error { _, err := mustNew(t, Config{}).LookupBounded([]byte("k"), nil, 0); return err }, ErrNoNodes},
		{"rendezvous without nodes", func() error { _, err := NewRendezvous(); return err }, ErrNoNodes},
		{"rendezvous duplicate", func() error { _, err := NewRendezvous(Node{ID: "a", Weight: 1}, Node{ID: "a", Weight: 1}); return err }, ErrDuplicateNode},
		{"rendezvous zero weight", func() error { _, err := NewRendezvous(Node{ID: "a"}); return err }, ErrBadWeight},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// Failed changes leave the ring as it was.
	if base.Len() != 1 || base.NumPoints() != DefaultVNodes {
		t.Fatalf("a failed change altered the ring: %d nodes, %d points", base.Len(), base.NumPoints())
	}
}

func TestEmptyRing(t *testing.T) {
	r := mustNew(t, Config{})
	if id, ok := r.Lookup([]byte("k")); ok || id != "" {
		t.Errorf("Lookup on an empty ring = %q, %v", id, ok)
	}
	if id, ok := r.LookupString("k"); ok || id != "" {
		t.Errorf("LookupString on an empty ring = %q, %v", id, ok)
	}
	if got := r.Replicas([]byte("k"), 3); len(got) != 0 {
		t.Errorf("Replicas on an empty ring = %v", got)
	}
	if got := r.LookupHash(7); got != -1 {
		t.Errorf("LookupHash on an empty ring = %d", got)
	}
	var zero Ring
	if _, ok := zero.LookupString("k"); ok || zero.NumPoints() != 0 || zero.Len() != 0 {
		t.Errorf("the zero Ring is not empty: %d points, %d nodes", zero.NumPoints(), zero.Len())
	}
	grown, err := zero.Add(Node{ID: "a", Weight: 1})
	if err != nil {
		t.Fatalf("Add on the zero Ring: %v", err)
	}
	if grown.NumPoints() != DefaultVNodes {
		t.Errorf("Add on the zero Ring gave %d points, want %d", grown.NumPoints(), DefaultVNodes)
	}
}

func TestHashByName(t *testing.T) {
	for _, name := range []string{"xxhash", "seed000", "md5"} {
		h, err := HashByName(name)
		if err != nil || h.String() != name {
			t.Errorf("HashByName(%q) = %v, %v", name, h, err)
		}
	}
	if (PointHash{}).String() != "xxhash" || (Config{}).withDefaults().Hash.String() != "xxhash" {
		t.Error("the zero PointHash is not xxhash")
	}
	// Documented point formulas.
	pts, err := XXHash.Points("alpha", 2)
	if err != nil || pts[1] != XXHash.KeyString("alpha#1") {
		t.Errorf("xxhash point 1 of alpha = %v, %v; want xxhash64(\"alpha#1\")", pts, err)
	}
	pts, err = MD5.Points("server3", 1)
	if err != nil || pts[0] != MD5.Key([]byte("server3#0")) {
		t.Errorf("md5 point 0 of server3 = %v, %v", pts, err)
	}
	long := string(make([]byte, 100)) // past the stack buffer of md5KeyString
	if MD5.KeyString(long) != MD5.Key([]byte(long)) {
		t.Error("md5 of a long string key differs from its bytes form")
	}
}

// TestLookupAllocs: the lookup paths do not allocate.
func TestLookupAllocs(t *testing.T) {
	key := []byte("user:1042")
	for _, m := range hashModes {
		var nodes []Node
		for i := range 10 {
			nodes = append(nodes, Node{ID: m.id(i), Weight: 1, Zone: "z" + strconv.Itoa(i%3)})
		}
		r := mustNew(t, m.cfg, nodes...)
		load := make([]uint64, r.Len())
		dst := make([]string, 0, 8)
		rv, err := NewRendezvous(nodes...)
		if err != nil {
			t.Fatal(err)
		}
		paths := map[string]func(){
			"Lookup":         func() { r.Lookup(key) },
			"LookupString":   func() { r.LookupString("user:1042") },
			"LookupBounded":  func() { _, _ = r.LookupBounded(key, load, 0.25) },
			"AppendReplicas": func() { dst = r.AppendReplicas(dst[:0], key, 3) },
			"Rendezvous":     func() { rv.LookupString("user:1042") },
			"Jump":           func() { JumpString("user:1042", 10) },
		}
		for name, f := range paths {
			if a := testing.AllocsPerRun(200, f); a != 0 {
				t.Errorf("%s %s: %.1f allocs per call, want 0", m.name, name, a)
			}
		}
	}
}
