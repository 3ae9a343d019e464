package ringcompat

import (
	"testing"
)

func TestJump(t *testing.T) {
	// Published values of other implementations of the paper's code (the
	// Python jump-consistent-hash README; a TypeScript port's test table).
	vectors := []struct {
		key     uint64
		buckets int
		want    int
	}{
		{256, 1024, 520},
		{10863919174838991, 11, 6},
		{2016238256797177309, 11, 3},
		{42, 1, 0},
		{42, 0, -1},
		{42, -5, -1},
	}
	for _, v := range vectors {
		if got := Jump(v.key, v.buckets); got != v.want {
			t.Errorf("Jump(%d, %d) = %d, want %d", v.key, v.buckets, got, v.want)
		}
	}

	// Growing from n to n+1 buckets moves a key only into bucket n.
	keys := testKeys(20_000)
	prev := make([]int, len(keys))
	for n := 1; n <= 40; n++ {
		counts := make([]int, n)
		for i, k := range keys {
			b := JumpString(k, n)
			if b < 0 || b >= n {
				t.Fatalf("JumpString(%s, %d) = %d, out of range", k, n, b)
			}
			if n > 1 && b != prev[i] && b != n-1 {
				t.Fatalf("growing to %d buckets moved %s from %d to %d", n, k, prev[i], b)
			}
			prev[i] = b
			counts[b]++
		}
		if n == 10 {
			mean := float64(len(keys)) / 10
			hi := 0
			for _, c := range counts {
				hi = max(hi, c)
			}
			t.Logf("jump, 10 buckets, %d keys: max/mean = %.4f", len(keys), float64(hi)/mean)
		}
	}
}

func TestRendezvous(t *testing.T) {
	keys := testKeys(20_000)
	nodes := []Node{{ID: "a", Weight: 1}, {ID: "b", Weight: 2}, {ID: "c", Weight: 3}, {ID: "d", Weight: 4}}
	rv, err := NewRendezvous(nodes...)
	if err != nil {
		t.Fatal(err)
	}
	// Order of nodes does not matter.
	rv2, err := NewRendezvous(nodes[3], nodes[1], nodes[0], nodes[2])
	if err != nil {
		t.Fatal(err)
	}
	before := make([]string, len(keys))
	counts := map[string]int{}
	for i, k := range keys {
		before[i] = rv.LookupString(k)
		if got := rv2.Lookup([]byte(k)); got != before[i] {
			t.Fatalf("node order changed the owner of %s: %s vs %s", k, got, before[i])
		}
		counts[before[i]]++
	}
	for _, n := range nodes {
		share := float64(counts[n.ID]) / (float64(len(keys)) * float64(n.Weight) / 10)
		t.Logf("rendezvous %s (weight %d): %.4f of its weighted share", n.ID, n.Weight, share)
		if share < 0.9 || share > 1.1 {
			t.Errorf("node %s got %.4f of its weighted share, want within 10%%", n.ID, share)
		}
	}

	// Removing c moves only c's keys; adding e moves keys only onto e.
	without, err := NewRendezvous(nodes[0], nodes[1], nodes[3])
	if err != nil {
		t.Fatal(err)
	}
	with, err := NewRendezvous(append(nodes, Node{ID: "e", Weight: 2})...)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if got := without.LookupString(k); got != before[i] && before[i] != "c" {
			t.Fatalf("removing c moved %s from %s to %s", k, before[i], got)
		}
		if got := with.LookupString(k); got != before[i] && got != "e" {
			t.Fatalf("adding e moved %s from %s to %s", k, before[i], got)
		}
	}
}
