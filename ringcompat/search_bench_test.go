package ringcompat

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// Binary searches of a sorted array, the layouts the Eytzinger order of Ring
// replaced; BenchmarkSearchLayout runs them on the same points and keys in
// the same process, so their ratio survives a noisy machine better than
// absolute ns/op.

// searchBranchy is the textbook lower bound (sort.Search style), wrapping.
func searchBranchy(pts []uint64, h uint64) int {
	lo, hi := 0, len(pts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if pts[m] < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(pts) {
		return 0
	}
	return lo
}

// searchBranchless is the same lower bound with the comparison as a number.
func searchBranchless(pts []uint64, h uint64) int {
	base, n := 0, len(pts)
	for n > 1 {
		half := n >> 1
		_, less := bits.Sub64(pts[base+half-1], h, 0)
		base += half & -int(less)
		n -= half
	}
	_, less := bits.Sub64(pts[base], h, 0)
	if base += int(less); base == len(pts) {
		return 0
	}
	return base
}

// inOrder returns the ring's points sorted and the tree position of each.
func inOrder(r *Ring) (pts []uint64, pos []int) {
	for i, k := 0, r.first; i < r.NumPoints(); i, k = i+1, r.next(k) {
		pts = append(pts, r.keys[k])
		pos = append(pos, k)
	}
	return pts, pos
}

// ringOf lays sorted points out as a Ring, owners numbered by sorted index,
// so that ties and edge values can be placed exactly.
func ringOf(sorted []uint64, strict bool) *Ring {
	r := &Ring{cfg: Config{StrictSuccessor: strict}, keys: make([]uint64, len(sorted)+1), owners: make([]uint32, len(sorted)+1)}
	if len(sorted) > 0 {
		r.first = r.leftmost(1)
		for i, k := 0, r.first; i < len(sorted); i, k = i+1, r.next(k) {
			r.keys[k], r.owners[k] = sorted[i], uint32(i)
		}
	}
	return r
}

// TestEytzingerSearch checks successor and next against a linear scan of the
// sorted points, for every size up to 70 (complete and ragged trees), with
// duplicate points, and at the ends of the hash space.
func TestEytzingerSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for n := 1; n <= 70; n++ {
		sorted := make([]uint64, n)
		for i := range sorted {
			sorted[i] = rng.Uint64N(40) * 1000 // few values: many ties
		}
		sorted[0] = 0
		if n > 3 {
			sorted[n-1] = ^uint64(0)
		}
		slices.Sort(sorted)
		for _, strict := range []bool{false, true} {
			r := ringOf(sorted, strict)
			pts, pos := inOrder(r)
			if !slices.Equal(pts, sorted) {
				t.Fatalf("n=%d: in-order walk %v, want %v", n, pts, sorted)
			}
			if r.next(pos[n-1]) != pos[0] {
				t.Fatalf("n=%d: next of the largest point does not wrap", n)
			}
			probe := []uint64{0, 1, ^uint64(0), ^uint64(0) - 1}
			for _, p := range sorted {
				probe = append(probe, p-1, p, p+1)
			}
			for _, h := range probe {
				want := 0 // index of the first sorted point >= h (> h if strict), wrapping
				for want < n && (sorted[want] < h || strict && sorted[want] == h) {
					want++
				}
				want %= n
				if got := r.successor(h); r.owners[got] != uint32(want) {
					t.Fatalf("n=%d strict=%v: successor(%d) is sorted index %d, want %d", n, strict, h, r.owners[got], want)
				}
				if !strict {
					if got := searchBranchy(sorted, h); got != want {
						t.Fatalf("n=%d: searchBranchy(%d) = %d, want %d", n, h, got, want)
					}
					if got := searchBranchless(sorted, h); got != want {
						t.Fatalf("n=%d: searchBranchless(%d) = %d, want %d", n, h, got, want)
					}
				}
			}
		}
	}
}

func BenchmarkSearchLayout(b *testing.B) {
	hashes := make([]uint64, len(benchKeys))
	for i, k := range benchKeys {
		hashes[i] = XXHash.Key(k)
	}
	for _, nodes := range []int{10, 1000} {
		r := benchRing(b, Config{VNodes: 128}, nodes)
		sorted, _ := inOrder(r)
		name := "nodes=" + strconv.Itoa(nodes) + "x128/"
		var sink int
		b.Run(name+"eytzinger", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				sink += r.successor(hashes[i&(len(hashes)-1)])
			}
		})
		b.Run(name+"sorted-branchy", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				sink += searchBranchy(sorted, hashes[i&(len(hashes)-1)])
			}
		})
		b.Run(name+"sorted-branchless", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				sink += searchBranchless(sorted, hashes[i&(len(hashes)-1)])
			}
		})
		_ = sink
	}
}

// TestRadixSort: stable by position, so ties keep node order, for inputs
// that share bytes (skipped passes) and inputs that do not.
func TestRadixSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, spread := range []uint64{1, 3, 1 << 20, ^uint64(0)} {
		in := make([]entry, 5000)
		for i := range in {
			in[i] = entry{p: rng.Uint64N(spread) << 7, n: uint32(i)}
		}
		want := slices.Clone(in)
		slices.SortStableFunc(want, func(a, b entry) int {
			switch {
			case a.p < b.p:
				return -1
			case a.p > b.p:
				return 1
			}
			return 0
		})
		if got := radixSort(slices.Clone(in), make([]entry, len(in))); !slices.Equal(got, want) {
			t.Fatalf("spread %d: radix sort differs from a stable sort", spread)
		}
	}
	if got := radixSort(nil, nil); len(got) != 0 {
		t.Fatal("radix sort of nothing returned something")
	}
}
