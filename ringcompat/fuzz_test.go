package ringcompat

import (
	"slices"
	"testing"
)

// FuzzLookup checks, for any key, every hash mode against a linear scan of
// the sorted points, the string and byte forms against each other, and the
// replica prefix property.
func FuzzLookup(f *testing.F) {
	for _, k := range []string{"", "a", "user:42", "{user:42}:cart", "\xff\xff\xff"} {
		f.Add([]byte(k), uint8(3))
	}
	type ringCase struct {
		r      *Ring
		sorted []uint64
		pos    []int
	}
	var rings []ringCase
	for _, m := range hashModes {
		var nodes []Node
		for i := range 6 {
			nodes = append(nodes, Node{ID: m.id(i), Weight: 1 + i%2, Zone: []string{"x", "y", ""}[i%3]})
		}
		r := mustNew(f, m.cfg, nodes...)
		sorted, pos := inOrder(r)
		rings = append(rings, ringCase{r, sorted, pos})
	}
	f.Fuzz(func(t *testing.T, key []byte, k uint8) {
		for _, rc := range rings {
			r := rc.r
			h := r.cfg.Hash.Key(key)
			want := 0
			for want < len(rc.sorted) && (rc.sorted[want] < h || r.cfg.StrictSuccessor && rc.sorted[want] == h) {
				want++
			}
			wantID := r.nodes[r.owners[rc.pos[want%len(rc.pos)]]].ID
			if got, _ := r.Lookup(key); got != wantID {
				t.Fatalf("%s: Lookup(%q) = %s, want %s", r.cfg.Hash, key, got, wantID)
			}
			if got, _ := r.LookupString(string(key)); got != wantID {
				t.Fatalf("%s: LookupString(%q) = %s, want %s", r.cfg.Hash, key, got, wantID)
			}
			short, long := r.Replicas(key, int(k%8)), r.Replicas(key, int(k%8)+1)
			if len(long) > 0 && long[0] != wantID || !slices.Equal(short, long[:len(short)]) {
				t.Fatalf("%s: Replicas(%q): %v is not a prefix of %v led by %s", r.cfg.Hash, key, short, long, wantID)
			}
		}
	})
}
