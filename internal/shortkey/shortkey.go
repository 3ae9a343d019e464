package shortkey

import "encoding/binary"

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

// Load64 reads the first 8 bytes of s little-endian (one load: the
// compiler merges the pattern). It inlines.
func Load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// BelowBrace reports whether every byte of w0 and wn is below '{' (0x7b),
// which rules out a '{' in a key with fewer instructions than testing for
// the byte itself (HasBrace): printable ASCII keys pass it.
func BelowBrace(w0, wn uint64) bool {
	// Adding 0x05 to a byte sets its top bit exactly when the byte is
	// 0x7b-0x7f, and carries into the next byte only from a byte >= 0xfb;
	// the top bits of w itself catch every byte >= 0x80, carry or not.
	const five, top = 0x0505050505050505, 0x8080808080808080
	return (w0|wn|(w0+five)|(wn+five))&top == 0
}

// HasBrace reports whether any byte of w is '{': the classic "has a zero
// byte" test, (x - 0x01..01) &^ x & 0x80..80 != 0, of x = w ^ '{'*0x01..01,
// exact for the question "is there any?".
func HasBrace(w uint64) bool {
	x := w ^ 0x7b7b7b7b7b7b7b7b
	return (x-0x0101010101010101)&^x&0x8080808080808080 != 0
}
