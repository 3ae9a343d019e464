package ringcompat

import (
	"strconv"
	"testing"
	"unsafe"
)

// benchKeys are looked up round-robin so that a benchmark walks many search
// paths, as real traffic does, instead of one path that stays in L1.
var benchKeys = func() [][]byte {
	keys := make([][]byte, 1<<14)
	for i := range keys {
		keys[i] = []byte("user:" + strconv.Itoa(i*7919))
	}
	return keys
}()

func benchRing(b *testing.B, cfg Config, nodes int) *Ring {
	b.Helper()
	ns := make([]Node, nodes)
	for i := range ns {
		ns[i] = Node{ID: strconv.Itoa(i), Weight: 1, Zone: "z" + strconv.Itoa(i%3)}
	}
	return mustNew(b, cfg, ns...)
}

func BenchmarkLookup(b *testing.B) {
	for _, hc := range []struct {
		name string
		cfg  Config
	}{
		{"xxhash", Config{Hash: XXHash, VNodes: 128}},
		{"seed000", Config{Hash: Seed000, VNodes: 128}},
	} {
		for _, nodes := range []int{10, 1000} {
			b.Run(hc.name+"/nodes="+strconv.Itoa(nodes)+"x128", func(b *testing.B) {
				r := benchRing(b, hc.cfg, nodes)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					r.Lookup(benchKeys[i&(len(benchKeys)-1)])
					i++
				}
			})
		}
	}
}

func BenchmarkReplicas3(b *testing.B) {
	for _, nodes := range []int{10, 1000} {
		b.Run("nodes="+strconv.Itoa(nodes)+"x128", func(b *testing.B) {
			r := benchRing(b, Config{VNodes: 128}, nodes)
			dst := make([]string, 0, 3)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				dst = r.AppendReplicas(dst[:0], benchKeys[i&(len(benchKeys)-1)], 3)
				i++
			}
		})
	}
}

func BenchmarkLookupBounded(b *testing.B) {
	r := benchRing(b, Config{VNodes: 128}, 10)
	load := make([]uint64, r.Len())
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id, _ := r.LookupBounded(benchKeys[i&(len(benchKeys)-1)], load, 0.25)
		n, _ := r.Index(id)
		load[n]++
		i++
	}
}

// BenchmarkBuild builds a 1,000 x 128 ring and reports the memory a ring
// keeps per point (retained-B/point) and allocates while building
// (build-B/point).
func BenchmarkBuild(b *testing.B) {
	ns := make([]Node, 1000)
	for i := range ns {
		ns[i] = Node{ID: "node-" + strconv.Itoa(i), Weight: 1}
	}
	b.ReportAllocs()
	var r *Ring
	for b.Loop() {
		r = mustNew(b, Config{VNodes: 128}, ns...)
	}
	retained := cap(r.keys)*8 + cap(r.owners)*4 + cap(r.nodes)*int(nodeSize) + cap(r.zones)*4
	b.ReportMetric(float64(retained)/float64(r.NumPoints()), "retained-B/point")
}

func BenchmarkRendezvous(b *testing.B) {
	for _, nodes := range []int{10, 1000} {
		b.Run("nodes="+strconv.Itoa(nodes), func(b *testing.B) {
			ns := make([]Node, nodes)
			for i := range ns {
				ns[i] = Node{ID: strconv.Itoa(i), Weight: 1}
			}
			rv, err := NewRendezvous(ns...)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				rv.Lookup(benchKeys[i&(len(benchKeys)-1)])
				i++
			}
		})
	}
}

func BenchmarkJump(b *testing.B) {
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		Jump(i*0x9e3779b97f4a7c15, 1000)
		i++
	}
}

func BenchmarkInitialAssignment(b *testing.B) {
	ns := numbered(10, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := InitialAssignment(ns, DefaultVNodes); err != nil {
			b.Fatal(err)
		}
	}
}

const nodeSize = unsafe.Sizeof(Node{})
