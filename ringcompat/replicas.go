package ringcompat

import (
	"fmt"
	"math"
)

// Replicas returns the replica set of key: up to k distinct nodes met
// walking clockwise from the key's successor, the owner first. When nodes
// have zones, the walk first takes only nodes of zones not yet chosen, and
// walks again from the start to fill the rest with distinct nodes; nodes with
// an empty zone count as a zone of their own, so without zones this is seed
// 000's replicas. It returns fewer than k nodes when the ring has fewer.
//
// The list for k is always a prefix of the list for any larger k, so raising
// the replication factor adds copies without moving existing ones.
func (r *Ring) Replicas(key []byte, k int) []string {
	return r.AppendReplicas(nil, key, k)
}

// ReplicasString is Replicas for a string key.
func (r *Ring) ReplicasString(key string, k int) []string {
	if r.first == 0 {
		return nil
	}
	return r.appendReplicas(nil, r.cfg.Hash.keyStr(key), k)
}

// AppendReplicas appends the replica set of key to dst and returns it. It
// does not allocate when dst has room for k more ids and k <= 16.
func (r *Ring) AppendReplicas(dst []string, key []byte, k int) []string {
	if r.first == 0 {
		return dst
	}
	return r.appendReplicas(dst, r.cfg.Hash.key(key), k)
}

func (r *Ring) appendReplicas(dst []string, h uint64, k int) []string {
	var buf [16]uint32
	for _, n := range r.replicaIndexes(buf[:0], h, k) {
		dst = append(dst, r.nodes[n].ID)
	}
	return dst
}

// replicaIndexes appends to chosen the node indexes of the replica set of
// ring position h. The ring must not be empty.
func (r *Ring) replicaIndexes(chosen []uint32, h uint64, k int) []uint32 {
	k = min(k, len(r.nodes))
	if k <= 0 {
		return chosen
	}
	base := len(chosen)
	start := r.successor(h)
	n := r.NumPoints()
	// Pass 1: a node from a zone not chosen yet, until every zone is used.
	p := start
	for j, want := 0, min(k, r.nzones); j < n && len(chosen)-base < want; j, p = j+1, r.next(p) {
		c := r.owners[p]
		if !r.zoneChosen(chosen[base:], c) {
			chosen = append(chosen, c)
		}
	}
	// Pass 2: fill with distinct nodes, same walk. It restarts from the key
	// so that the order depends only on k, which keeps the prefix property.
	p = start
	for j := 0; j < n && len(chosen)-base < k; j, p = j+1, r.next(p) {
		c := r.owners[p]
		if !contains(chosen[base:], c) {
			chosen = append(chosen, c)
		}
	}
	return chosen
}

func (r *Ring) zoneChosen(chosen []uint32, c uint32) bool {
	for _, x := range chosen {
		if r.zones[x] == r.zones[c] {
			return true
		}
	}
	return false
}

func contains(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// BoundedCap is the capacity of the reference ring's bounded-load lookup: with the given
// per-node loads, the next key may go to a node whose load is below
// ceil((1+eps) * (sum(load)+1) / len(load)).
func BoundedCap(load []uint64, eps float64) uint64 {
	var total uint64 = 1 // the key being placed
	for _, l := range load {
		total += l
	}
	return uint64(math.Ceil((1 + eps) * float64(total) / float64(len(load))))
}

// LookupBounded is the reference ring's bounded-load lookup (Mirrokni, Thorup and
// Zadimoghaddam): the first node clockwise from key's successor whose load is
// below BoundedCap(load, eps). load[i] is the current load of node i in Nodes
// order; weights do not change the cap. The caller records the placement.
//
// It returns ErrNoNodes on an empty ring and ErrBadLoad when len(load) is not
// Len() or eps is negative or not a number. It does not allocate.
func (r *Ring) LookupBounded(key []byte, load []uint64, eps float64) (string, error) {
	if r.first == 0 {
		return "", fmt.Errorf("%w: the ring is empty", ErrNoNodes)
	}
	if len(load) != len(r.nodes) {
		return "", fmt.Errorf("%w: %d loads for %d nodes", ErrBadLoad, len(load), len(r.nodes))
	}
	if !(eps >= 0) {
		return "", fmt.Errorf("%w: eps %v must be >= 0", ErrBadLoad, eps)
	}
	limit := BoundedCap(load, eps)
	p := r.successor(r.cfg.Hash.key(key))
	for range r.NumPoints() {
		if c := r.owners[p]; load[c] < limit {
			return r.nodes[c].ID, nil
		}
		p = r.next(p)
	}
	// Unreachable for eps >= 0: the loads would sum past their own total.
	return "", fmt.Errorf("%w: every node is at capacity %d", ErrBadLoad, limit)
}
