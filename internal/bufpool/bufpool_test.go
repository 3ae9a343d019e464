package bufpool

import (
	"testing"

	"google.golang.org/grpc/mem"
)

func TestGet(t *testing.T) {
	var p Pool
	for _, n := range []int{1, 1000, 32 << 10, 32<<10 + 1, 64 << 10, 64<<10 + 1, 1 << 20, 1<<20 + 100, 4 << 20, 8 << 20, 8<<20 + 1} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): len %d", n, len(*b))
		}
		p.Put(b)
		if b2 := p.Get(n); len(*b2) != n {
			t.Fatalf("Get(%d) after Put: len %d", n, len(*b2))
		}
	}
}

// TestMaterialize: a buffer reused for a message holds that message's bytes
// exactly, however large the earlier one was.
func TestMaterialize(t *testing.T) {
	var p Pool
	fill := func(n int, v byte) mem.BufferSlice {
		a, b := make([]byte, n/2), make([]byte, n-n/2)
		for i := range a {
			a[i] = v
		}
		for i := range b {
			b[i] = v
		}
		return mem.BufferSlice{mem.SliceBuffer(a), mem.SliceBuffer(b)}
	}
	for i, n := range []int{3 << 20, 1 << 20, 2<<20 + 7, 100 << 10} {
		v := byte(i + 1)
		buf := fill(n, v).MaterializeToBuffer(&p)
		got := buf.ReadOnlyData()
		if len(got) != n {
			t.Fatalf("message %d: %d bytes, want %d", i, len(got), n)
		}
		for j, c := range got {
			if c != v {
				t.Fatalf("message %d: byte %d is %d, want %d", i, j, c, v)
			}
		}
		buf.Free()
	}
}

func BenchmarkMaterialize(b *testing.B) {
	s := mem.BufferSlice{mem.SliceBuffer(make([]byte, 512<<10)), mem.SliceBuffer(make([]byte, 600<<10))}
	for _, tc := range []struct {
		name string
		pool mem.BufferPool
	}{{"overwritten", new(Pool)}, {"grpc-default", mem.DefaultBufferPool()}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(s.Len()))
			b.ReportAllocs()
			for b.Loop() {
				s.MaterializeToBuffer(tc.pool).Free()
			}
		})
	}
}
