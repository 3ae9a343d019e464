package slots

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/slotd/slotd/internal/shortkey"
)

// Count is the number of slots. It is fixed forever: changing it remaps every key.
const Count = 16384

// ErrOutOfRange is returned when a number is not a valid slot.
var ErrOutOfRange = errors.New("slots: slot out of range")

// Slot is one of the Count slots. Its field is unexported so that a Slot can
// only be made through ForKey, ForString, New or MustNew: it never holds Count
// or more. The zero value is slot 0.
type Slot struct{ n uint16 }

// New returns slot n, or ErrOutOfRange when n is not in [0, Count).
func New(n int) (Slot, error) {
	if n < 0 || n >= Count {
		return Slot{}, fmt.Errorf("%w: %d is not in 0-%d", ErrOutOfRange, n, Count-1)
	}
	return Slot{uint16(n)}, nil
}

// MustNew is New for constants and loops already bounded by Count; it panics
// on an out-of-range n.
func MustNew(n int) Slot {
	s, err := New(n)
	if err != nil {
		panic(err)
	}
	return s
}

// Int returns the slot number, in [0, Count).
func (s Slot) Int() int { return int(s.n) }

// Uint16 returns the slot number, for compact encodings.
func (s Slot) Uint16() uint16 { return s.n }

// String returns the slot number in decimal.
func (s Slot) String() string { return fmt.Sprint(s.n) }

// ForKey returns the slot of a key given as bytes. It does not allocate.
func ForKey(key []byte) Slot {
	// Keys of 8 to 16 bytes, the common case, are searched for '{' as two
	// (overlapping) 8-byte words with a SWAR test instead of a call to
	// bytes.IndexByte, whose set-up costs as much as the hash for a key
	// this short; the same two words then feed a pure-Go xxhash64. The
	// pieces are in internal/shortkey so that client.Route can inline them.
	w0, wn, ok := shortkey.Words(key)
	if !ok && len(key) >= 8 && len(key) <= 16 {
		// A byte at or above '{': look for the '{' itself.
		ok = !shortkey.HasBrace(w0) && !shortkey.HasBrace(wn)
	}
	if ok {
		if len(key) == 16 { // one call less on the hot path
			return FromHash(shortkey.Sum16(w0, wn))
		}
		return FromHash(shortkey.Sum(w0, wn, len(key)))
	}
	// Keys of up to 64 bytes are tested for '{' the same way, as one or two
	// blocks of up to 32 bytes, inline (bytes.IndexByte, a call and a
	// set-up, cost as much as the hash for keys this short), then hashed
	// whole.
	if n := len(key); n > 16 && n <= 64 {
		if shortkey.BelowBrace32(key[:min(n, 32)]) && (n <= 32 || shortkey.BelowBrace32(key[n-32:])) {
			return FromHash(xxhash.Sum64(key))
		}
	}
	lo, hi := tagBounds(key)
	return FromHash(xxhash.Sum64(key[lo:hi]))
}

// FromHash returns the slot of a key whose hashed part (see TaggedBytes)
// has xxhash64 h: h mod Count, the slot function's last step.
func FromHash(h uint64) Slot { return Slot{uint16(h & (Count - 1))} }

// ForString returns the slot of a key given as a string. It does not
// allocate: ForKey only reads its key, so it is handed the string's bytes as
// they are.
func ForString(key string) Slot { return ForKey(bytesOf(key)) }

// TaggedBytes returns the part of key that is hashed: the bytes between the
// first '{' and the first '}' after it when there is at least one byte
// between them, else the whole key.
func TaggedBytes(key []byte) []byte {
	lo, hi := tagBounds(key)
	return key[lo:hi]
}

// TaggedString is TaggedBytes for a string key.
func TaggedString(key string) string {
	lo, hi := tagBounds(bytesOf(key))
	return key[lo:hi]
}

// tagBounds returns where the part of key that is hashed begins and ends
// (see TaggedBytes).
func tagBounds(key []byte) (lo, hi int) {
	open, rest := 8, 0 // the first '{' (8: not found yet), where to look next
	if len(key) >= 8 {
		// Most tags open in the key's first word ("{user:42}:cart",
		// "cart:{user:42}"): found there with a few instructions, where
		// bytes.IndexByte is a call and a set-up that cost about as much
		// as the hash of a short key.
		open, rest = shortkey.FirstBrace(binary.LittleEndian.Uint64(key)), 8
	}
	if open == 8 {
		i := bytes.IndexByte(key[rest:], '{')
		if i < 0 {
			return 0, len(key)
		}
		open = rest + i
	}
	closing := bytes.IndexByte(key[open+1:], '}')
	if closing <= 0 { // no '}' after the '{', or "{}" with nothing between
		return 0, len(key)
	}
	return open + 1, open + 1 + closing
}

// bytesOf returns the bytes of s without a copy, for functions that only
// read them.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
