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
// It does not inline; Sum16 does.
func Sum(w0, wn uint64, n int) uint64 {
	if n == 16 {
		return Sum16(w0, wn)
	}
	h := mix8(prime5+uint64(n), w0)
	// The n-8 bytes after the first word are the top bytes of wn.
	r := n - 8
	t := wn >> (8 * uint(8-r))
	if r >= 4 {
		h ^= (t & 0xffffffff) * prime1
		h = bits.RotateLeft64(h, 23)*prime2 + prime3
		t >>= 32
		r -= 4
	}
	for ; r > 0; r-- {
		h ^= (t & 0xff) * prime5
		h = bits.RotateLeft64(h, 11) * prime1
		t >>= 8
	}
	return avalanche(h)
}

// Sum16 returns xxhash64 of a 16-byte key whose halves are w0 and wn
// (little-endian). It inlines.
func Sum16(w0, wn uint64) uint64 { return avalanche(mix8(mix8(prime5+16, w0), wn)) }

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
