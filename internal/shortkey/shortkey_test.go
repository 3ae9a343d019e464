package shortkey

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestBelowBrace checks the quick test against its definition (every byte
// below 0x7b) on every pair of adjacent byte values at every position of
// each word, the rest filled with bytes on either side of the threshold:
// that covers each byte value and each carry from one byte into the next.
func TestBelowBrace(t *testing.T) {
	below := func(w uint64) bool {
		for i := 0; i < 8; i++ {
			if byte(w>>(8*i)) >= '{' {
				return false
			}
		}
		return true
	}
	for _, fill := range []byte{0x00, 'a', 0x7a} {
		base := uint64(fill) * 0x0101010101010101
		for pos := 0; pos < 7; pos++ {
			for pair := 0; pair < 1<<16; pair++ {
				w := base&^(0xffff<<(8*pos)) | uint64(pair)<<(8*pos)
				if got, want := BelowBrace(w, base), below(w); got != want {
					t.Fatalf("BelowBrace(%#016x, fill) = %v, want %v", w, got, want)
				}
				if got, want := BelowBrace(base, w), below(w); got != want {
					t.Fatalf("BelowBrace(fill, %#016x) = %v, want %v", w, got, want)
				}
			}
		}
	}
}

func TestHasBrace(t *testing.T) {
	for _, tc := range []struct {
		w    uint64
		want bool
	}{
		{0, false},
		{0x7b, true},
		{0x7b00000000000000, true},
		{0x7a7c7a7c7a7c7a7c, false},
		{0xfbfbfbfbfbfbfbfb, false},
		{0x7b7b7b7b7b7b7b7b, true},
		{0x7c7b7a7b01ff7b00, true},
	} {
		if got := HasBrace(tc.w); got != tc.want {
			t.Errorf("HasBrace(%#x) = %v, want %v", tc.w, got, tc.want)
		}
	}
}

func TestWords(t *testing.T) {
	for _, tc := range []struct {
		key    string
		w0, wn uint64
		ok     bool
	}{
		{"", 0, 0, false},
		{"1234567", 0, 0, false},
		{"12345678", 0x3837363534333231, 0x3837363534333231, true},
		{"user:0123456789a", 0x3231303a72657375, 0x6139383736353433, true},
		{"user:{12}:56789a", 0x31317b3a72657375, 0x6139383736353a7d, false},
		{"12345678901234567", 0, 0, false},
	} {
		w0, wn, ok := Words([]byte(tc.key))
		if ok != tc.ok || ok && (w0 != tc.w0 || wn != tc.wn) {
			t.Errorf("Words(%q) = %#x, %#x, %v; want %#x, %#x, %v", tc.key, w0, wn, ok, tc.w0, tc.wn, tc.ok)
		}
	}
}

// TestSum pins the pure-Go short hash against xxhash.Sum64 at every length
// it takes, on fill bytes that exercise every tail byte.
func TestSum(t *testing.T) {
	src := []byte("\x00\xff\x80\x7f0123456789abcdefghijklmnop")
	for n := 8; n <= 16; n++ {
		for off := 0; off+n <= len(src); off++ {
			k := src[off : off+n]
			w0, wn := binary.LittleEndian.Uint64(k), binary.LittleEndian.Uint64(k[n-8:])
			want := xxhash.Sum64(k)
			if got := Sum(w0, wn, n); got != want {
				t.Errorf("Sum(%q) = %#x, want %#x", k, got, want)
			}
			if n == 16 {
				if got := Sum16(w0, wn); got != want {
					t.Errorf("Sum16(%q) = %#x, want %#x", k, got, want)
				}
			}
		}
	}
}

// TestBelowBrace32 checks the block test against its definition at every
// length it takes, with each byte value that matters at every position in
// turn over a fill below '{': one byte on the wrong side anywhere, in either
// block or in their overlap, must be caught.
func TestBelowBrace32(t *testing.T) {
	below := func(b []byte) bool {
		for _, c := range b {
			if c >= '{' {
				return false
			}
		}
		return true
	}
	for n := 16; n <= 32; n++ {
		for _, fill := range []byte{0x00, 'a', 0x7a} {
			key := bytes.Repeat([]byte{fill}, n)
			for i := range key {
				for _, c := range []byte{0x7a, '{', '|', '}', 0x7f, 0x80, 0xfa, 0xfb, 0xff} {
					key[i] = c
					if got, want := BelowBrace32(key), below(key); got != want {
						t.Fatalf("BelowBrace32(%q) = %v, want %v", key, got, want)
					}
				}
				key[i] = fill
			}
		}
	}
}

func TestFirstBrace(t *testing.T) {
	for _, fill := range []byte{0x00, 'a', 'z', '|', '}', 0x7a, 0xfb, 0xff} {
		word := bytes.Repeat([]byte{fill}, 8)
		if got := FirstBrace(binary.LittleEndian.Uint64(word)); got != 8 {
			t.Errorf("FirstBrace(%q) = %d, want 8", word, got)
		}
		for i := range word {
			// A '{' at i, and at every place after it (the first counts).
			for j := i; j < 8; j++ {
				w := bytes.Clone(word)
				w[i], w[j] = '{', '{'
				if got := FirstBrace(binary.LittleEndian.Uint64(w)); got != i {
					t.Errorf("FirstBrace(%q) = %d, want %d", w, got, i)
				}
			}
		}
	}
}
