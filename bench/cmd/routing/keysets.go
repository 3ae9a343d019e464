package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// keySet is one set of numKeys keys the item-6 ratio is also measured on,
// beside the 16-byte keys the target is stated for.
type keySet struct {
	name string // "8 bytes", "hash tag, 18 bytes"
	path string // which way client.Route takes them
	keys [][]byte
	// target is the most Route / floor may be in every block, 0 where
	// none is stated: 2x for the keys longer than 16 bytes and the
	// hash-tagged ones, which most applications' keys are.
	target float64
}

// longKeyTarget is the target of the keys longer than 16 bytes and the
// hash-tagged ones: Route within 2x of the bare hash of the same keys.
const longKeyTarget = 2

// suffix pads the 16-byte `user:` keys to longer lengths, the way
// applications qualify a user's keys.
const suffix = ":profile:settings:notifications:email:preferences:v1"

// otherKeySets returns keys of 8, 12, 24, 32 and 64 bytes, the 16-byte keys
// of makeKeys again (measured the same way, for reference), and keys with a
// hash tag (`{user:NNNNNN}:cart`), from the same fixed random numbers as
// makeKeys.
func otherKeySets() []keySet {
	const inline, long, tagged = "inline (8-16 bytes, none >= '{')", "slots.ForKey (17-64 bytes: word test, then xxhash.Sum64)", "slots.ForKey (a byte >= '{': the hash tag scan)"
	sets := []struct {
		n    int
		path string
		key  func(d uint64) string
	}{
		{8, inline, func(d uint64) string { return fmt.Sprintf("u:%06d", d%1e6) }},
		{12, inline, func(d uint64) string { return fmt.Sprintf("user:%07d", d%1e7) }},
		{16, inline, func(d uint64) string { return fmt.Sprintf("user:%011d", d) }},
		{24, long, func(d uint64) string { return fmt.Sprintf("user:%011d%s", d, suffix[:8]) }},
		{32, long, func(d uint64) string { return fmt.Sprintf("user:%011d%s", d, suffix[:16]) }},
		{64, long, func(d uint64) string { return fmt.Sprintf("user:%011d%s", d, suffix[:48]) }},
		{18, tagged, func(d uint64) string { return fmt.Sprintf("{user:%06d}:cart", d%1e6) }},
	}
	out := make([]keySet, len(sets))
	for i, s := range sets {
		rng := rand.New(rand.NewPCG(1, 2)) // makeKeys's numbers
		keys := make([][]byte, numKeys)
		for j := range keys {
			keys[j] = []byte(s.key(rng.Uint64N(1e11)))
			if len(keys[j]) != s.n {
				fail(fmt.Errorf("key set %d: key %q has %d bytes", s.n, keys[j], len(keys[j])))
			}
		}
		name := strconv.Itoa(s.n) + " bytes"
		switch {
		case s.path == tagged:
			name = "hash tag, " + name
		case s.n == keyLen:
			name += " (the item-6 keys)"
		}
		out[i] = keySet{name: name, path: s.path, keys: keys}
		if s.n > keyLen || s.path == tagged {
			out[i].target = longKeyTarget
		}
	}
	return out
}

// keySetRow is the row of one key set at n nodes.
func keySetRow(n int, set keySet, p pairedResult) string {
	verdict := "none stated"
	if set.target > 0 {
		verdict = fmt.Sprintf("%gx: %s", set.target, verdictWithin(p, set.target))
	}
	return fmt.Sprintf("| %s nodes | %s | `%s` | %s | %.2f ns | %.2f ns | **%.2f** | %.2f-%.2f | %.2f | %s |",
		fmtInt(n), set.name, set.keys[0], set.path, p.floorNs, p.oursNs, p.ratio, p.q1, p.q3, p.worst, verdict)
}
