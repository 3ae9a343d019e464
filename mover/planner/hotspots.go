package planner

import (
	"fmt"
	"strings"

	"github.com/slotd/slotd/slots"
)

// Hot spots: a slot whose load alone exceeds the band of the largest node
// stays, and its node keeps only it.

// isolate finds the hot slots (see HotSpot), leaves each where it is, moves
// the other loaded slots of its node away, and takes the node and its slot
// out of the model the rest is balanced in. It reports whether any was found.
func (b *balancer) isolate() bool {
	maxShare := 0.0
	for _, n := range b.nodes {
		if n.member {
			maxShare = max(maxShare, n.share)
		}
	}
	type hs struct {
		s, d  int
		score float64
	}
	var found []hs
	for s, o := range b.owner {
		if !b.nodes[o].member {
			continue
		}
		best := hs{s: -1}
		for _, d := range b.dims {
			if b.total[d] <= 0 {
				continue
			}
			if x := b.sl[s][d] / (maxShare * b.total[d]); x > 1+b.tol && x > best.score {
				best = hs{s, d, x}
			}
		}
		if best.s >= 0 {
			found = append(found, best)
		}
	}
	if len(found) == 0 {
		return false
	}
	keep := map[int]bool{}
	for _, f := range found {
		o := b.owner[f.s]
		n := &b.nodes[o]
		b.plan.HotSpots = append(b.plan.HotSpots, HotSpot{
			Slot: f.s, Node: n.id, Dimension: dimNames[f.d],
			Share: round3(b.sl[f.s][f.d] / (n.share * b.total[f.d])),
			Tag:   hotTag(b.in.Loads[n.id], f.s),
		})
		n.hot = true
		keep[f.s] = true
		b.fixed[f.s] = true
	}
	// The rest is balanced among the other members.
	var stays vec
	b.weight = 0
	for i := range b.nodes {
		n := &b.nodes[i]
		if !n.member {
			continue
		}
		if n.hot {
			n.share = 0
			continue
		}
		b.weight += n.weight
	}
	for s, o := range b.owner {
		if b.nodes[o].hot && (keep[s] || b.fixed[s]) {
			for d := range nDims {
				stays[d] += b.sl[s][d]
			}
		}
	}
	for d := range nDims {
		b.total[d] = max(0, b.total[d]-stays[d])
	}
	for i := range b.nodes {
		if n := &b.nodes[i]; n.member && !n.hot {
			n.share = n.weight / b.weight
		}
	}
	if b.weight == 0 {
		return true
	}
	var ss []int
	for s, o := range b.owner {
		if b.nodes[o].hot && !b.fixed[s] && !b.moved[s] && b.normalized(s) > 0 {
			ss = append(ss, s)
		}
	}
	b.place(ss, func(s int) string {
		return fmt.Sprintf("%s keeps hot slot %s alone", b.nodes[b.owner[s]].id, hotOf(b.plan.HotSpots, b.nodes[b.owner[s]].id))
	})
	return true
}

func hotOf(hs []HotSpot, node string) string {
	var parts []string
	for _, h := range hs {
		if h.Node == node {
			parts = append(parts, fmt.Sprint(h.Slot))
		}
	}
	return strings.Join(parts, ", ")
}

// hotTag is the hash tag the node's hot keys in slot s share, if they share
// one ("{cart7}"), else "".
func hotTag(l NodeLoad, s int) string {
	tag, n := "", 0
	for _, k := range l.HotKeys {
		if int(k.Slot) != s {
			continue
		}
		t := slots.TaggedString(k.Key)
		if t == k.Key { // no tag
			return ""
		}
		if n > 0 && t != tag {
			return ""
		}
		tag, n = t, n+1
	}
	if n < hotKeysToTag {
		return ""
	}
	return "{" + tag + "}"
}
