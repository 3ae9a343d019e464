package ringcompat

import (
	"cmp"
	"fmt"
	"slices"
)

// DefaultVNodes is the number of points per unit of weight when Config.VNodes
// is zero. Seed 000: the load spread is about 1/sqrt(v); 128 keeps the most
// loaded of 10 nodes within about 10% of the mean.
const DefaultVNodes = 128

// MaxPoints bounds the points of one ring (sum of VNodes*Weight) so that a
// typo in a weight cannot exhaust memory: 2^24 points are 192 MiB.
const MaxPoints = 1 << 24

// Node is a ring member: a stable id (never an address), a weight (>0; vnodes scale with it), an optional zone.
//
// A node gets VNodes*Weight points. Nodes with the same non-empty Zone are
// kept apart by Replicas; a node with an empty Zone is a zone of its own.
type Node struct {
	ID     string
	Weight int
	Zone   string
}

// Config fixes how a ring places nodes and keys. Rings built from the same
// Config and the same node set answer identically, whatever the order the
// nodes were given in.
type Config struct {
	// Hash places keys and points. Zero means XXHash.
	Hash PointHash
	// VNodes is the number of points per unit of node weight. Zero means
	// DefaultVNodes.
	VNodes int
	// StrictSuccessor makes a key's successor the first point strictly
	// greater than the key's hash (seed 001, Python's bisect.bisect) instead
	// of the first point at or after it (seed 000). It only matters when a key
	// hashes exactly onto a point.
	StrictSuccessor bool
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	c.Hash = c.Hash.orDefault()
	if c.VNodes == 0 {
		c.VNodes = DefaultVNodes
	}
	return c
}

// Validate reports whether c, after defaults, can build a ring.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.VNodes < 0 || c.VNodes > MaxPoints {
		return fmt.Errorf("%w: got %d, want 1-%d (0 means %d)", ErrBadVNodes, c.VNodes, MaxPoints, DefaultVNodes)
	}
	return nil
}

// Ring is an immutable consistent-hash ring. It is safe for concurrent use
// without locks because nothing changes it after New: Add and Remove return a
// new Ring (swap it in with a Holder).
//
// Points are kept as a sorted []uint64 with a parallel []uint32 of node
// indexes: 12 bytes per point, and the binary search touches only the dense
// uint64 array.
type Ring struct {
	cfg    Config
	nodes  []Node   // sorted by cfg.Hash.cmpID; a node's index is its position here
	zones  []uint32 // zone class of each node; equal classes share a zone
	nzones int      // number of distinct zone classes
	points []uint64 // sorted ascending; ties broken by node index
	owners []uint32 // owners[i] is the node index of points[i]
}

// New builds a ring over nodes. An empty node list gives an empty ring, whose
// lookups find nothing. It returns ErrBadVNodes, ErrBadNodeID, ErrBadWeight,
// ErrDuplicateNode or ErrTooManyPoints.
func New(cfg Config, nodes ...Node) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	sorted := slices.Clone(nodes)
	for _, n := range sorted {
		if err := checkNode(cfg.Hash, n); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(sorted, func(a, b Node) int { return cfg.Hash.cmpID(a.ID, b.ID) })
	total := 0
	for i, n := range sorted {
		if i > 0 && sorted[i-1].ID == n.ID {
			return nil, fmt.Errorf("%w: %q appears twice", ErrDuplicateNode, n.ID)
		}
		// Checked per node so that VNodes*Weight cannot overflow.
		if n.Weight > MaxPoints/cfg.VNodes || total+n.Weight*cfg.VNodes > MaxPoints {
			return nil, fmt.Errorf("%w: node %q with weight %d at %d vnodes takes the ring past %d points; lower the weight or vnodes",
				ErrTooManyPoints, n.ID, n.Weight, cfg.VNodes, MaxPoints)
		}
		total += n.Weight * cfg.VNodes
	}
	return build(cfg, sorted, total), nil
}

// checkNode validates one node on its own.
func checkNode(h PointHash, n Node) error {
	if n.ID == "" {
		return fmt.Errorf("%w: a node has an empty id", ErrBadNodeID)
	}
	if err := h.checkID(n.ID); err != nil {
		return err
	}
	if n.Weight <= 0 {
		return fmt.Errorf("%w: node %q has weight %d", ErrBadWeight, n.ID, n.Weight)
	}
	return nil
}

// build makes the ring from validated nodes already in canonical order.
func build(cfg Config, nodes []Node, total int) *Ring {
	r := &Ring{
		cfg:    cfg,
		nodes:  nodes,
		zones:  make([]uint32, len(nodes)),
		points: make([]uint64, 0, total),
		owners: make([]uint32, total),
	}
	zoneClass := make(map[string]uint32)
	for i, n := range nodes {
		if n.Zone == "" {
			r.zones[i] = uint32(len(nodes) + i) // a zone of its own
			continue
		}
		c, ok := zoneClass[n.Zone]
		if !ok {
			c = uint32(len(zoneClass))
			zoneClass[n.Zone] = c
		}
		r.zones[i] = c
	}
	r.nzones = len(zoneClass)
	for _, n := range nodes {
		if n.Zone == "" {
			r.nzones++
		}
	}

	type entry struct {
		p uint64
		n uint32
	}
	entries := make([]entry, 0, total)
	var buf []uint64
	for i, n := range nodes {
		buf = cfg.Hash.points(buf[:0], n.ID, n.Weight*cfg.VNodes)
		for _, p := range buf {
			entries = append(entries, entry{p, uint32(i)})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := cmp.Compare(a.p, b.p); c != 0 {
			return c
		}
		return cmp.Compare(a.n, b.n)
	})
	for i, e := range entries {
		r.points = append(r.points, e.p)
		r.owners[i] = e.n
	}
	return r
}

// Config returns the configuration the ring was built with, defaults filled in.
func (r *Ring) Config() Config { return r.cfg }

// Nodes returns a copy of the ring's nodes in index order (the order Index
// and LookupBounded's load vector use).
func (r *Ring) Nodes() []Node { return slices.Clone(r.nodes) }

// Len returns the number of nodes.
func (r *Ring) Len() int { return len(r.nodes) }

// NumPoints returns the number of points on the ring.
func (r *Ring) NumPoints() int { return len(r.points) }

// Index returns the index of node id in Nodes, and whether it is on the ring.
func (r *Ring) Index(id string) (int, bool) {
	return slices.BinarySearchFunc(r.nodes, id, func(n Node, id string) int { return r.cfg.Hash.cmpID(n.ID, id) })
}

// Add returns a new ring with nodes added; r is unchanged. It returns the
// errors of New, and ErrDuplicateNode for a node already on the ring.
func (r *Ring) Add(nodes ...Node) (*Ring, error) {
	all := make([]Node, 0, len(r.nodes)+len(nodes))
	all = append(append(all, r.nodes...), nodes...)
	return New(r.cfg, all...)
}

// Remove returns a new ring without the nodes ids; r is unchanged. It returns
// ErrUnknownNode for an id not on the ring.
func (r *Ring) Remove(ids ...string) (*Ring, error) {
	drop := make([]bool, len(r.nodes))
	for _, id := range ids {
		i, ok := r.Index(id)
		if !ok {
			return nil, fmt.Errorf("%w: %q is not on the ring", ErrUnknownNode, id)
		}
		drop[i] = true
	}
	keep := make([]Node, 0, len(r.nodes))
	for i, n := range r.nodes {
		if !drop[i] {
			keep = append(keep, n)
		}
	}
	return New(r.cfg, keep...)
}

// successor returns the index of the point that owns ring position h: the
// first point at or after h (after h when StrictSuccessor), wrapping to 0.
// The ring must not be empty.
func (r *Ring) successor(h uint64) int {
	pts := r.points
	lo, hi := 0, len(pts)
	if r.cfg.StrictSuccessor {
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if pts[m] <= h {
				lo = m + 1
			} else {
				hi = m
			}
		}
	} else {
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if pts[m] < h {
				lo = m + 1
			} else {
				hi = m
			}
		}
	}
	if lo == len(pts) {
		return 0
	}
	return lo
}

// Lookup returns the node owning key, or false on an empty ring. It does not
// allocate.
func (r *Ring) Lookup(key []byte) (string, bool) {
	if len(r.points) == 0 {
		return "", false
	}
	return r.nodes[r.owners[r.successor(r.cfg.Hash.key(key))]].ID, true
}

// LookupString is Lookup for a string key. It does not allocate.
func (r *Ring) LookupString(key string) (string, bool) {
	if len(r.points) == 0 {
		return "", false
	}
	return r.nodes[r.owners[r.successor(r.cfg.Hash.keyStr(key))]].ID, true
}

// LookupHash returns the index (in Nodes) of the node owning ring position h,
// or -1 on an empty ring. Callers that hash keys themselves use it.
func (r *Ring) LookupHash(h uint64) int {
	if len(r.points) == 0 {
		return -1
	}
	return int(r.owners[r.successor(h)])
}
