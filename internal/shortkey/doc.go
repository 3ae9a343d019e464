// Package shortkey is the slot function's fast path for keys of 8 to 16
// bytes, in pieces small enough for the compiler to inline: the key's two
// 8-byte words, a test that no byte can be a hash tag's '{', and a pure-Go
// xxhash64 (seed 0) of the words. Two more pieces serve longer keys, which
// slots.ForKey hashes with the assembly xxhash64 once they are tested a
// word at a time: the same test over 16 to 32 bytes (BelowBrace32), and
// the place of a '{' in a word (FirstBrace), where most hash tags open.
//
// slots.ForKey is built on it, and so is the SDK's Route, which inlines
// these pieces instead of calling slots.ForKey: one call less on the hot
// path (see client.(*Client).Route). The slot function itself is defined by
// package slots; its tests (testdata/slots.tsv, FuzzForKey) pin every user
// of these pieces, and this package's tests pin the hash against
// github.com/cespare/xxhash/v2.
//
// Usage (what client.Route does; any other key goes to slots.ForKey):
//
//	if w0, wn, ok := shortkey.Words(key); ok { // 8-16 bytes, none >= '{'
//		var h uint64
//		if len(key) == 16 {
//			h = shortkey.Sum16(w0, wn)
//		} else {
//			h4, t, r := shortkey.Tail4(shortkey.Start(w0, len(key)), wn, len(key))
//			h = shortkey.Finish(shortkey.Tail1(h4, t, r))
//		}
//		s = slots.FromHash(h) // the same as shortkey.Sum(w0, wn, len(key))
//	}
package shortkey
