package shortkey

import (
	"encoding/binary"
	"math/bits"
)

// A byte 0x01, 0x05 and 0x80 in every place of a word: the SWAR constants.
const ones, five, top = 0x0101010101010101, 0x0505050505050505, 0x8080808080808080

// Words returns the first and the last 8 bytes of key, little-endian (they
// overlap when the key is shorter than 16 bytes), and ok when the key has 8
// to 16 bytes all below '{' (0x7b): such a key has no hash tag, so the
// slot function hashes it whole. It inlines.
func Words(key []byte) (w0, wn uint64, ok bool) {
	n := len(key)
	if n < 8 || n > 16 {
		return 0, 0, false
	}
	w0, wn = binary.LittleEndian.Uint64(key), binary.LittleEndian.Uint64(key[n-8:])
	return w0, wn, BelowBrace(w0, wn)
}

// BelowBrace reports whether every byte of w0 and wn is below '{' (0x7b),
// which rules out a '{' in a key with fewer instructions than testing for
// the byte itself (HasBrace): printable ASCII keys pass it.
func BelowBrace(w0, wn uint64) bool {
	// aboveBits written out: inlined inside BelowBrace, its call would
	// leave an inline mark (a NOP) on Route's 16-byte path.
	return (w0|wn|(w0+five)|(wn+five))&top == 0
}

// aboveBits returns a word whose top bits are all clear when every byte of
// w0 and w1 is below '{'; the words of several pairs are ORed before the
// test. Adding 0x05 to a byte sets its top bit exactly when the byte is
// 0x7b-0x7f, and carries into the next byte only from a byte >= 0xfb; the
// top bits of w itself catch every byte >= 0x80, carry or not.
func aboveBits(w0, w1 uint64) uint64 { return w0 | w1 | (w0 + five) | (w1 + five) }

// HasBrace reports whether any byte of w is '{': the classic "has a zero
// byte" test, (x - 0x01..01) &^ x & 0x80..80 != 0, of x = w ^ '{'*0x01..01,
// exact for the question "is there any?".
func HasBrace(w uint64) bool { return braceBits(w) != 0 }

// braceBits is HasBrace's test: the top bit of each byte of w that is '{',
// and maybe of bytes above one (a borrow), never below the first.
func braceBits(w uint64) uint64 {
	x := w ^ '{'*ones
	return (x - ones) &^ x & top
}

// BelowBrace32 is BelowBrace for a key of 16 to 32 bytes: whether every
// byte is below '{', so that the key has no hash tag and is hashed whole.
// It reads the key as two blocks of 16 bytes, the second ending at the
// key's end and overlapping the first unless the key has 32 bytes: no
// loop, where bytes.IndexByte is a call and a set-up that cost more than
// the scan of a key this short. It inlines.
func BelowBrace32(key []byte) bool {
	return (above16(key[:16])|above16(key[len(key)-16:]))&top == 0
}

// above16 is aboveBits of b's first 16 bytes.
func above16(b []byte) uint64 {
	return aboveBits(binary.LittleEndian.Uint64(b[0:8]), binary.LittleEndian.Uint64(b[8:16]))
}

// FirstBrace returns the index of the first '{' among w's 8 bytes (the
// first in memory is the lowest, little-endian), 8 when there is none. The
// lowest bit HasBrace's test sets is exact: a borrow can set a bit only
// above a byte that is '{'. It inlines.
func FirstBrace(w uint64) int { return bits.TrailingZeros64(braceBits(w)) / 8 }
