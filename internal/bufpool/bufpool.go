// Package bufpool is a gRPC mem.BufferPool for the large buffers a slot
// copy materializes its messages into (an export batch of about 1 MiB in
// the mover's relay, an import of up to 4 MiB on a target), which gRPC's
// default pool does not keep: above its largest size class every Get was a
// new allocation, zeroed by the runtime, only to be overwritten at once by
// the message's bytes. This pool keeps them and does not clear them: every
// caller here overwrites the whole length it asked for (what
// mem.BufferSlice.MaterializeToBuffer does), so no byte of an earlier
// message can be read through a reused buffer.
package bufpool

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// Size classes are powers of two from minSize to maxSize; a length outside
// them goes to gRPC's default pool.
const (
	minShift = 16 // 64 KiB
	maxShift = 23 // 8 MiB
)

// Pool is a mem.BufferPool for buffers of 64 KiB to 8 MiB that callers
// overwrite in full. The zero value is ready; safe for concurrent use.
type Pool struct {
	classes [maxShift - minShift + 1]sync.Pool
}

var _ mem.BufferPool = (*Pool)(nil)

// Overwritten is the Pool the relay and the import path share.
var Overwritten = new(Pool)

// class returns the index of the smallest class holding length, or -1.
func class(length int) int {
	if length <= 1<<(minShift-1) || length > 1<<maxShift {
		return -1
	}
	shift := bits.Len(uint(length - 1)) // 1<<shift >= length
	return max(shift, minShift) - minShift
}

// Get returns a buffer of length bytes whose contents are unspecified.
func (p *Pool) Get(length int) *[]byte {
	c := class(length)
	if c < 0 {
		return mem.DefaultBufferPool().Get(length)
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:length]
		return b
	}
	b := make([]byte, length, 1<<(c+minShift))
	return &b
}

// Put returns a buffer that Get gave.
func (p *Pool) Put(b *[]byte) {
	c := class(cap(*b))
	if c < 0 || cap(*b) != 1<<(c+minShift) {
		mem.DefaultBufferPool().Put(b)
		return
	}
	p.classes[c].Put(b)
}
