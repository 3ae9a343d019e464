package shortkey

import "math/bits"

// The xxhash64 (seed 0) of a key of 8 to 16 bytes, in pure Go, from the two
// 8-byte words already loaded for the brace test. For keys this short the
// assembly xxhash.Sum64 costs more in its call than in its arithmetic; this
// is the same algorithm (XXH64's tail rules for 8-, 4- and 1-byte steps),
// pinned against xxhash.Sum64 by TestSum and slots.FuzzForKey.

const (
	prime1 uint64 = 11400714785074694791
	prime2 uint64 = 14029467366897019727
	prime3 uint64 = 1609587929392839161
	prime4 uint64 = 9650029242287828579
	prime5 uint64 = 2870177450012600261
)

// Sum returns xxhash64 of an n-byte key, 8 <= n <= 16, whose first 8 bytes
// are w0 and last 8 bytes are wn (little-endian; they overlap when n < 16).
// It does not inline; Sum16 does, and so do the pieces Sum is made of
// below 16 bytes (Start, Tail4, Tail1, Finish).
func Sum(w0, wn uint64, n int) uint64 {
	if n == 16 {
		return Sum16(w0, wn)
	}
	h, t, r := Tail4(Start(w0, n), wn, n)
	return Finish(Tail1(h, t, r))
}

// Start begins the hash of an n-byte key, 8 <= n < 16, with its first word:
// XXH64's seed-0 state for n bytes, then one 8-byte step. It inlines.
func Start(w0 uint64, n int) uint64 { return mix8(prime5+uint64(n), w0) }

// Tail4 starts on the n-8 bytes after the first word of an n-byte key,
// 8 <= n < 16 (the top n-8 bytes of wn, the key's last 8 bytes): it folds
// one 4-byte step into h if there are 4 or more, as XXH64's tail does, and
// returns h, the bytes left (at the bottom of t) and how many (0-3). It
// inlines.
func Tail4(h, wn uint64, n int) (_, t uint64, r uint) {
	r = uint(n-8) & 7
	t = wn >> (64 - 8*r) // 0 when r is 0 (a Go shift by 64)
	if r >= 4 {
		h ^= (t & 0xffffffff) * prime1
		h = bits.RotateLeft64(h, 23)*prime2 + prime3
		t >>= 32
	}
	return h, t, r & 3
}

// Tail1 finishes the tail Tail4 left: one step per byte, r of them
// (r <= 3), unrolled: a loop here would make the compiler lay out Route's
// 8-15-byte path as the likely one, ahead of 16 bytes. It inlines.
func Tail1(h, t uint64, r uint) uint64 {
	if r != 0 {
		h = step1(h, t)
		if r != 1 {
			h = step1(h, t>>8)
			if r == 3 {
				h = step1(h, t>>16)
			}
		}
	}
	return h
}

// step1 is XXH64's tail step for the one byte at the bottom of t.
func step1(h, t uint64) uint64 {
	return bits.RotateLeft64(h^(t&0xff)*prime5, 11) * prime1
}

// Finish is XXH64's final mix (avalanche). It inlines.
func Finish(h uint64) uint64 { return avalanche(h) }

// Sum16 returns xxhash64 of a 16-byte key whose halves are w0 and wn
// (little-endian): avalanche(mix8(mix8(prime5+16, w0), wn)), written out.
// It inlines, and with no calls of its own inside it leaves no inline
// marks (a NOP each where the compiler finds no instruction to put one
// on) on Route's path.
func Sum16(w0, wn uint64) uint64 {
	h := uint64(prime5 + 16)
	h ^= bits.RotateLeft64(w0*prime2, 31) * prime1
	h = bits.RotateLeft64(h, 27)*prime1 + prime4
	h ^= bits.RotateLeft64(wn*prime2, 31) * prime1
	h = bits.RotateLeft64(h, 27)*prime1 + prime4
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}

// mix8 folds one 8-byte word into h (XXH64's round with a zero accumulator,
// then the merge step of its tail).
func mix8(h, w uint64) uint64 {
	h ^= bits.RotateLeft64(w*prime2, 31) * prime1
	return bits.RotateLeft64(h, 27)*prime1 + prime4
}

// avalanche is XXH64's final mix.
func avalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}
