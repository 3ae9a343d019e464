package ringcompat

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Rendezvous is weighted rendezvous (highest random weight) hashing: a key
// goes to the node with the highest score -weight/ln(u), u being a uniform
// (0,1) draw from Mix(xxhash64(key) ^ xxhash64(node id)). Node i then wins a
// key with probability weight_i / sum(weights), removing a node moves only
// its keys, and adding one moves keys only onto it. A lookup costs O(nodes),
// against the ring's O(log points), but needs no vnodes.
//
// A Rendezvous is immutable and safe for concurrent use.
type Rendezvous struct {
	nodes  []Node   // sorted by id; ties in score go to the smaller id
	hashes []uint64 // xxhash64 of each id
}

// NewRendezvous builds a rendezvous hasher over nodes. It returns
// ErrNoNodes, ErrBadNodeID, ErrBadWeight or ErrDuplicateNode.
func NewRendezvous(nodes ...Node) (*Rendezvous, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: rendezvous hashing needs at least one node", ErrNoNodes)
	}
	sorted := slices.Clone(nodes)
	for _, n := range sorted {
		if err := checkNode(XXHash, n); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(sorted, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
	rv := &Rendezvous{nodes: sorted, hashes: make([]uint64, len(sorted))}
	for i, n := range sorted {
		if i > 0 && sorted[i-1].ID == n.ID {
			return nil, fmt.Errorf("%w: %q appears twice", ErrDuplicateNode, n.ID)
		}
		rv.hashes[i] = xxhash.Sum64String(n.ID)
	}
	return rv, nil
}

// Nodes returns a copy of the nodes, sorted by id.
func (rv *Rendezvous) Nodes() []Node { return slices.Clone(rv.nodes) }

// Lookup returns the node owning key. It does not allocate.
func (rv *Rendezvous) Lookup(key []byte) string { return rv.lookup(xxhash.Sum64(key)) }

// LookupString is Lookup for a string key.
func (rv *Rendezvous) LookupString(key string) string {
	return rv.lookup(xxhash.Sum64String(key))
}

func (rv *Rendezvous) lookup(kh uint64) string {
	best, bestScore := 0, math.Inf(-1)
	for i, nh := range rv.hashes {
		// The top 53 bits as a float in (0,1): never 0, so ln(u) < 0.
		u := (float64(Mix(kh^nh)>>11) + 0.5) / (1 << 53)
		score := -float64(rv.nodes[i].Weight) / math.Log(u)
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return rv.nodes[best].ID
}
