package ringcompat_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/slotd/slotd/mover/planner/simplan"
	"github.com/slotd/slotd/ringcompat"
	"github.com/slotd/slotd/slots"
)

// TestSimulateMD5Table reproduces the published md5 ring simulation's table
// and checks that fixed slots move what the plan moves, all of it onto the new server.
func TestSimulateMD5Table(t *testing.T) {
	res, err := ringcompat.Simulate(ringcompat.SimConfig{
		Keys: 100_000, Nodes: 4, Add: 1, VNodes: []int{1, 100}, Hash: ringcompat.MD5, Rebalance: simplan.Rebalance,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		scheme   string
		vnodes   int
		moved    string
		min, max int
		onlyNew  bool
	}{
		{"mod N", 0, "79.9", 24851, 25194, false},
		{"ring", 1, "9.0", 10134, 42472, true},
		{"ring", 100, "22.4", 22248, 27397, true},
	}
	if len(res.Rows) != 4 {
		t.Fatalf("%d rows, want 4 (mod N, two rings, fixed slots)", len(res.Rows))
	}
	for i, w := range want {
		r := res.Rows[i]
		if r.Scheme != w.scheme || r.VNodes != w.vnodes {
			t.Errorf("row %d is %s/%d, want %s/%d", i, r.Scheme, r.VNodes, w.scheme, w.vnodes)
		}
		if got := fmt.Sprintf("%.1f", r.MovedPct); got != w.moved {
			t.Errorf("%s/%d moved %s%%, want %s%%", w.scheme, w.vnodes, got, w.moved)
		}
		if r.Before != (ringcompat.Spread{Min: w.min, Max: w.max}) {
			t.Errorf("%s/%d before %+v, want %d/%d", w.scheme, w.vnodes, r.Before, w.min, w.max)
		}
		if r.OnlyToNew != w.onlyNew {
			t.Errorf("%s/%d only_to_new %v, want %v", w.scheme, w.vnodes, r.OnlyToNew, w.onlyNew)
		}
	}

	fixed := res.Rows[3]
	wantMoved := fixedSlotMoves(t, 100_000, 4, 1)
	if fixed.Scheme != "fixed slots" || fixed.MovedKeys != wantMoved || !fixed.OnlyToNew {
		t.Errorf("fixed slots row %+v, want %d keys moved, all to the new node", fixed, wantMoved)
	}
	if res.IdealPct != 20 {
		t.Errorf("ideal %v%%, want 20%%", res.IdealPct)
	}
}

// fixedSlotMoves counts, independently of Simulate, the keys user:0..keys-1
// whose slot the plan moves when add nodes join n.
func fixedSlotMoves(t *testing.T, keys, n, add int) int {
	t.Helper()
	var nodes []ringcompat.Node
	for s := range n + add {
		nodes = append(nodes, ringcompat.Node{ID: "server" + strconv.Itoa(s), Weight: 1})
	}
	boot, err := ringcompat.InitialAssignment(nodes[:n], ringcompat.DefaultVNodes)
	if err != nil {
		t.Fatal(err)
	}
	before, err := simplan.Rebalance(boot, nodes[:n])
	if err != nil {
		t.Fatal(err)
	}
	after, err := simplan.Rebalance(before, nodes)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i := range keys {
		s := slots.ForString("user:" + strconv.Itoa(i)).Int()
		if before[s] != after[s] {
			moved++
		}
	}
	return moved
}

// TestSimulateProperties checks what must hold for any hash and node count:
// every key counted once, rings and fixed slots moving keys only onto the new
// servers, nothing moving when nothing is added, and the ring rows agreeing
// with plain lookups by id (server10 sorts before server2).
func TestSimulateProperties(t *testing.T) {
	cases := []struct {
		name         string
		hash         ringcompat.PointHash
		keys, n, add int
		vnodes       []int
	}{
		{"xxhash 12+1", ringcompat.XXHash, 20_000, 12, 1, []int{1, 50}},
		{"seed000 3+2", ringcompat.Seed000, 20_000, 3, 2, []int{8}},
		{"md5 1+3", ringcompat.MD5, 5_000, 1, 3, []int{1, 100}},
		{"xxhash nothing added", ringcompat.XXHash, 5_000, 5, 0, []int{10}},
		// The bootstrap table of 500 nodes is far from balanced: only the
		// add may count.
		{"xxhash 500+1", ringcompat.XXHash, 50_000, 500, 1, []int{16}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ringcompat.SimConfig{Keys: tc.keys, Nodes: tc.n, Add: tc.add, VNodes: tc.vnodes, Hash: tc.hash, Rebalance: simplan.Rebalance}
			res, err := ringcompat.Simulate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			again, err := ringcompat.Simulate(cfg)
			if err != nil || !reflect.DeepEqual(res, again) {
				t.Fatalf("a second run differs: %+v vs %+v (%v)", again, res, err)
			}
			if len(res.Rows) != 2+len(tc.vnodes) {
				t.Fatalf("%d rows, want %d", len(res.Rows), 2+len(tc.vnodes))
			}
			for _, r := range res.Rows {
				mean := tc.keys / tc.n
				if r.Before.Min > mean || r.Before.Max < mean || r.After.Min > tc.keys/(tc.n+tc.add) || r.After.Max < tc.keys/(tc.n+tc.add) {
					t.Errorf("%s/%d: spread before %+v after %+v cannot hold %d keys", r.Scheme, r.VNodes, r.Before, r.After, tc.keys)
				}
				if r.MovedPct != 100*float64(r.MovedKeys)/float64(tc.keys) {
					t.Errorf("%s/%d: moved %v%% of %d keys is not %d keys", r.Scheme, r.VNodes, r.MovedPct, tc.keys, r.MovedKeys)
				}
				if r.Scheme != "mod N" && !r.OnlyToNew {
					t.Errorf("%s/%d moved keys between old servers", r.Scheme, r.VNodes)
				}
				if tc.add == 0 && r.MovedKeys != 0 {
					t.Errorf("%s/%d moved %d keys with no server added", r.Scheme, r.VNodes, r.MovedKeys)
				}
			}
			for i, v := range tc.vnodes {
				if got, want := res.Rows[1+i].MovedKeys, ringMoves(t, tc.hash, tc.keys, tc.n, tc.add, v); got != want {
					t.Errorf("ring/%d moved %d keys, plain lookups move %d", v, got, want)
				}
			}
			if got, want := res.Rows[len(res.Rows)-1].MovedKeys, fixedSlotMoves(t, tc.keys, tc.n, tc.add); got != want {
				t.Errorf("fixed slots moved %d keys, the plan moves %d", got, want)
			}
		})
	}
}

// ringMoves counts the keys whose owner id changes, with LookupString.
func ringMoves(t *testing.T, h ringcompat.PointHash, keys, n, add, vnodes int) int {
	t.Helper()
	id := func(s int) string {
		if h.String() == "seed000" {
			return strconv.Itoa(s)
		}
		return "server" + strconv.Itoa(s)
	}
	ring := func(n int) *ringcompat.Ring {
		var nodes []ringcompat.Node
		for s := range n {
			nodes = append(nodes, ringcompat.Node{ID: id(s), Weight: 1})
		}
		r, err := ringcompat.New(ringcompat.Config{Hash: h, VNodes: vnodes, StrictSuccessor: h.String() == "md5"}, nodes...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	before, after := ring(n), ring(n+add)
	moved := 0
	for i := range keys {
		k := "user:" + strconv.Itoa(i)
		a, _ := before.LookupString(k)
		b, _ := after.LookupString(k)
		if a != b {
			moved++
		}
	}
	return moved
}

func TestSimulateWithoutRebalance(t *testing.T) {
	res, err := ringcompat.Simulate(ringcompat.SimConfig{Keys: 1000, Nodes: 2, Add: 1})
	if err != nil {
		t.Fatal(err)
	}
	var schemes []string
	for _, r := range res.Rows {
		schemes = append(schemes, fmt.Sprintf("%s/%d", r.Scheme, r.VNodes))
	}
	if want := []string{"mod N/0", "ring/1", "ring/100"}; !slices.Equal(schemes, want) || res.Hash != "xxhash" {
		t.Errorf("rows %v hash %s, want %v with xxhash (the defaults, no fixed slots)", schemes, res.Hash, want)
	}
}

func TestSimulateRejects(t *testing.T) {
	ok := ringcompat.SimConfig{Keys: 100, Nodes: 4, Add: 1}
	with := func(change func(*ringcompat.SimConfig)) ringcompat.SimConfig {
		c := ok
		change(&c)
		return c
	}
	cases := []struct {
		name string
		cfg  ringcompat.SimConfig
	}{
		{"no keys", with(func(c *ringcompat.SimConfig) { c.Keys = 0 })},
		{"too many keys", with(func(c *ringcompat.SimConfig) { c.Keys = ringcompat.MaxSimKeys + 1 })},
		{"no nodes", with(func(c *ringcompat.SimConfig) { c.Nodes = 0 })},
		{"negative add", with(func(c *ringcompat.SimConfig) { c.Add = -1 })},
		{"more nodes than slots", with(func(c *ringcompat.SimConfig) { c.Add = slots.Count })},
		{"empty vnodes", with(func(c *ringcompat.SimConfig) { c.VNodes = []int{} })},
		{"zero vnodes", with(func(c *ringcompat.SimConfig) { c.VNodes = []int{1, 0} })},
		{"too many points", with(func(c *ringcompat.SimConfig) { c.VNodes = []int{ringcompat.MaxPoints} })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ringcompat.Simulate(tc.cfg); !errors.Is(err, ringcompat.ErrBadSimulation) {
				t.Fatalf("got %v, want ErrBadSimulation", err)
			}
		})
	}
}

func TestSimulateRebalanceErrors(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name      string
		rebalance func([]string, []ringcompat.Node) ([]string, error)
		is        error
	}{
		{"error", func([]string, []ringcompat.Node) ([]string, error) { return nil, boom }, boom},
		{"short table", func(o []string, _ []ringcompat.Node) ([]string, error) { return o[:10], nil }, nil},
		{"unknown owner", func(o []string, _ []ringcompat.Node) ([]string, error) {
			o[7] = "nobody"
			return o, nil
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ringcompat.Simulate(ringcompat.SimConfig{Keys: 100, Nodes: 2, Add: 1, Rebalance: tc.rebalance})
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("got %v, want an error (wrapping %v)", err, tc.is)
			}
		})
	}
}
