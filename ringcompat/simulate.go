package ringcompat

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/slotd/slotd/slots"
)

// ErrBadSimulation: a SimConfig that cannot be simulated.
var ErrBadSimulation = errors.New("ringcompat: bad simulation")

// Limits of Simulate, so that a typo cannot exhaust memory: a key costs about
// 10 bytes while it runs, so the largest run needs about 100 MB.
const (
	MaxSimKeys  = 10_000_000
	MaxSimNodes = slots.Count // fixed slots cannot spread over more nodes than slots
)

// SimConfig describes one offline simulation: Keys keys ("user:0",
// "user:1", ...) spread over Nodes servers ("server0", "server1", ...), then
// Add more servers joining.
type SimConfig struct {
	Keys  int // > 0
	Nodes int // servers before the add, > 0
	Add   int // servers added, >= 0
	// VNodes lists the points per server of the rings to simulate, one row
	// each; nil means 1 and 100, the published md5 ring simulation's sizes.
	VNodes []int
	// Hash places keys for hash % N and keys and points on the rings. Zero
	// means XXHash. The fixed-slot row always uses the slot function.
	Hash PointHash
	// Rebalance returns the slot table after the add: given the owner of
	// every slot before it and the grown node list, the owner of every slot
	// after it. slotd passes its planner here (this package sits below the
	// mover and cannot call it). Nil leaves out the fixed-slot row.
	Rebalance func(owners []string, nodes []Node) ([]string, error)
}

// DefaultSimVNodes are the ring sizes of the published md5 ring simulation
// (a Python script that hashes with md5 and places keys with bisect).
var DefaultSimVNodes = []int{1, 100}

func (c SimConfig) withDefaults() SimConfig {
	c.Hash = c.Hash.orDefault()
	if c.VNodes == nil {
		c.VNodes = DefaultSimVNodes
	}
	return c
}

// Validate reports whether c, after defaults, can be simulated. Errors wrap
// ErrBadSimulation and say which field is wrong.
func (c SimConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Keys <= 0 || c.Keys > MaxSimKeys:
		return fmt.Errorf("%w: keys %d, want 1-%d", ErrBadSimulation, c.Keys, MaxSimKeys)
	case c.Nodes <= 0:
		return fmt.Errorf("%w: nodes %d, want at least 1", ErrBadSimulation, c.Nodes)
	case c.Add < 0:
		return fmt.Errorf("%w: add %d, want 0 or more", ErrBadSimulation, c.Add)
	case c.Nodes+c.Add > MaxSimNodes || c.Nodes+c.Add < c.Nodes:
		return fmt.Errorf("%w: %d+%d nodes, want at most %d in all", ErrBadSimulation, c.Nodes, c.Add, MaxSimNodes)
	case len(c.VNodes) == 0:
		return fmt.Errorf("%w: no vnode counts; give at least one, such as 100", ErrBadSimulation)
	}
	total := c.Nodes + c.Add
	for _, v := range c.VNodes {
		if v <= 0 || v > MaxPoints/total {
			return fmt.Errorf("%w: %d vnodes over %d nodes, want 1-%d vnodes", ErrBadSimulation, v, total, MaxPoints/total)
		}
	}
	return nil
}

// Spread is the fewest and the most keys any one node holds.
type Spread struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// SimRow is what one placement scheme does when the nodes are added.
type SimRow struct {
	// Scheme is "mod N", "ring" or "fixed slots".
	Scheme string `json:"scheme"`
	// VNodes is the ring's points per server (0 for the other schemes).
	VNodes    int     `json:"vnodes"`
	MovedPct  float64 `json:"moved_pct"` // 100 * MovedKeys / Keys
	MovedKeys int     `json:"moved_keys"`
	Before    Spread  `json:"before"` // over the Nodes servers
	After     Spread  `json:"after"`  // over the Nodes+Add servers
	// OnlyToNew is true when every moved key went to an added server: no
	// key moved between servers that were already there.
	OnlyToNew bool `json:"only_to_new"`
}

// SimResult is the outcome of Simulate: one row per scheme, mod N first,
// then the rings in VNodes order, then fixed slots.
type SimResult struct {
	Keys  int    `json:"keys"`
	Nodes int    `json:"nodes"`
	Add   int    `json:"add"`
	Hash  string `json:"hash"`
	// IdealPct is the least any scheme can move and stay balanced:
	// 100 * Add / (Nodes + Add).
	IdealPct float64  `json:"ideal_moved_pct"`
	Rows     []SimRow `json:"rows"`
}

// Simulate counts, for each placement scheme, the keys that change server
// when cfg.Add servers join cfg.Nodes, and the keys per server before and
// after. It is the published md5 ring simulation, generalised, and reproduces its table
// with Hash MD5, 100,000 keys, 4 nodes, 1 added, VNodes 1 and 100.
//
// The schemes:
//
//   - "mod N": key k is on server Hash.KeyString(k) % n.
//   - "ring", once per VNodes entry: a Ring over the servers with that many
//     points each. Server s is "server{s}", so its points sit at the hash of
//     "server{s}#{r}", except with Seed000, whose points are defined on node
//     numbers: there server s is node s. With MD5 a key goes to the first
//     point strictly greater than its hash (as the md5 simulation's bisect
//     does); otherwise at or after.
//   - "fixed slots": key k is in slot slots.ForString(k). Before the add the
//     slots are owned as InitialAssignment (DefaultVNodes) gives them, then
//     balanced by cfg.Rebalance over the same nodes (the table of a running
//     cluster); after it, as cfg.Rebalance gives them over all the nodes. A
//     key moves when its slot does.
//
// Simulate is deterministic: the same cfg gives the same result. It returns
// an error wrapping ErrBadSimulation for a cfg that fails Validate, or the
// error of cfg.Rebalance.
func Simulate(cfg SimConfig) (*SimResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	res := &SimResult{
		Keys: cfg.Keys, Nodes: cfg.Nodes, Add: cfg.Add, Hash: cfg.Hash.String(),
		IdealPct: 100 * float64(cfg.Add) / float64(cfg.Nodes+cfg.Add),
	}

	// Hash every key once; each scheme then only maps hashes to servers.
	hashes := make([]uint64, cfg.Keys)
	buf := []byte("user:")
	for i := range hashes {
		hashes[i] = cfg.Hash.Key(strconv.AppendInt(buf[:5], int64(i), 10))
	}

	t := tally{nodes: cfg.Nodes, total: cfg.Nodes + cfg.Add}
	res.Rows = append(res.Rows, t.row("mod N", 0, len(hashes), func(i int, n int) int {
		return int(hashes[i] % uint64(n))
	}))

	for _, v := range cfg.VNodes {
		before, err := simRing(cfg.Hash, v, cfg.Nodes)
		if err != nil {
			return nil, err
		}
		after, err := simRing(cfg.Hash, v, t.total)
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, t.row("ring", v, len(hashes), func(i int, n int) int {
			r := before
			if n != cfg.Nodes {
				r = after
			}
			return r.server[r.ring.LookupHash(hashes[i])]
		}))
	}

	if cfg.Rebalance != nil {
		row, err := simFixedSlots(cfg, t)
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// simServers returns servers 0..n-1 as ring nodes of weight 1.
func simServers(h PointHash, n int) []Node {
	nodes := make([]Node, n)
	for s := range nodes {
		id := "server" + strconv.Itoa(s)
		if h.name == Seed000.name {
			id = strconv.Itoa(s)
		}
		nodes[s] = Node{ID: id, Weight: 1}
	}
	return nodes
}

// simRingOf is a ring and the server number of each of its node indexes
// (node indexes follow id order, which is not server order from server10 on).
type simRingOf struct {
	ring   *Ring
	server []int
}

func simRing(h PointHash, vnodes, n int) (simRingOf, error) {
	r, err := New(Config{Hash: h, VNodes: vnodes, StrictSuccessor: h.name == MD5.name}, simServers(h, n)...)
	if err != nil {
		return simRingOf{}, fmt.Errorf("%w: ring of %d nodes x %d points: %w", ErrBadSimulation, n, vnodes, err)
	}
	server := make([]int, n)
	for i, node := range r.nodes {
		// simServers made every id from its server number: the bare number
		// for seed000, after "server" for the others.
		server[i], _ = strconv.Atoi(strings.TrimPrefix(node.ID, "server"))
	}
	return simRingOf{ring: r, server: server}, nil
}

func simFixedSlots(cfg SimConfig, t tally) (SimRow, error) {
	nodes := simServers(XXHash, t.total)
	boot, err := InitialAssignment(nodes[:cfg.Nodes], DefaultVNodes)
	if err != nil {
		return SimRow{}, err
	}
	// The bootstrap table only caps nodes from above (past a few hundred
	// nodes some hold half the mean), so the first plan of a new cluster also
	// fills them. Starting from the balanced table counts only the add.
	before, err := cfg.Rebalance(slices.Clone(boot), slices.Clone(nodes[:cfg.Nodes]))
	if err != nil {
		return SimRow{}, fmt.Errorf("ringcompat: simulate: rebalance: %w", err)
	}
	if len(before) != slots.Count {
		return SimRow{}, fmt.Errorf("ringcompat: simulate: rebalance returned %d owners, want %d", len(before), slots.Count)
	}
	after, err := cfg.Rebalance(slices.Clone(before), slices.Clone(nodes))
	if err != nil {
		return SimRow{}, fmt.Errorf("ringcompat: simulate: rebalance: %w", err)
	}
	if len(after) != slots.Count {
		return SimRow{}, fmt.Errorf("ringcompat: simulate: rebalance returned %d owners, want %d", len(after), slots.Count)
	}
	number := make(map[string]int, len(nodes))
	for s, n := range nodes {
		number[n.ID] = s
	}
	ownerOf := func(table []string) ([]int32, error) {
		out := make([]int32, len(table))
		for slot, id := range table {
			s, ok := number[id]
			if !ok {
				return nil, fmt.Errorf("ringcompat: simulate: rebalance gave slot %d to %q, which is not a node", slot, id)
			}
			out[slot] = int32(s)
		}
		return out, nil
	}
	ob, err := ownerOf(before)
	if err != nil {
		return SimRow{}, err
	}
	oa, err := ownerOf(after)
	if err != nil {
		return SimRow{}, err
	}

	keySlot := make([]uint16, cfg.Keys)
	buf := []byte("user:")
	for i := range keySlot {
		keySlot[i] = uint16(slots.ForKey(strconv.AppendInt(buf[:5], int64(i), 10)).Int())
	}
	return t.row("fixed slots", 0, cfg.Keys, func(i int, n int) int {
		if n == cfg.Nodes {
			return int(ob[keySlot[i]])
		}
		return int(oa[keySlot[i]])
	}), nil
}

// tally turns a placement into a SimRow.
type tally struct {
	nodes int // servers before the add
	total int // servers after it
}

// row places each of keys keys with place(key index, server count), which
// returns a server number, before (t.nodes servers) and after (t.total).
func (t tally) row(scheme string, vnodes, keys int, place func(i, n int) int) SimRow {
	before := make([]int, t.nodes)
	after := make([]int, t.total)
	moved, onlyNew := 0, true
	for i := range keys {
		b, a := place(i, t.nodes), place(i, t.total)
		before[b]++
		after[a]++
		if a != b {
			moved++
			if a < t.nodes {
				onlyNew = false
			}
		}
	}
	return SimRow{
		Scheme: scheme, VNodes: vnodes,
		MovedPct: 100 * float64(moved) / float64(keys), MovedKeys: moved,
		Before:    Spread{slices.Min(before), slices.Max(before)},
		After:     Spread{slices.Min(after), slices.Max(after)},
		OnlyToNew: onlyNew,
	}
}
