package node

import (
	"bytes"
	"math"
	"slices"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/slotd/slotd/slots"
)

const (
	// HotKeyCapacity is how many keys the heavy-hitter sketch tracks.
	HotKeyCapacity = 64
	// HotKeySampling is the sketch's sampling rate: one request in this
	// many (per slot) is fed to it, so the request path pays for the
	// sketch's lock and scan on a sixteenth of requests only.
	HotKeySampling = 16
	// MaxHotKeyBytes is the longest key the sketch keeps whole; a longer
	// key is tracked by the hash of all of it and shown by its first
	// MaxHotKeyBytes bytes (HotKey.Truncated).
	MaxHotKeyBytes = 128
)

// HotKey is one of a node's hottest keys by the space-saving sketch.
type HotKey struct {
	Key  []byte
	Slot slots.Slot
	// Rate is the estimated requests per second (reads served and writes),
	// a decaying average over about a minute; the true rate is between
	// Rate-Error and Rate (space-saving never underestimates a tracked key,
	// up to sampling noise).
	Rate, Error float64
	// Truncated is set when Key is only the first MaxHotKeyBytes bytes.
	Truncated bool
}

// hotEntry is one tracked key. Its key bytes live inside the entry, so
// feeding the sketch never allocates.
type hotEntry struct {
	err    float64 // overestimate bound inherited from the evicted entry
	slot   slots.Slot
	keyLen int // full length of the key
	key    [MaxHotKeyBytes]byte
}

// hotKeys is a space-saving sketch (Metwally et al.) over sampled requests,
// with counts decayed at each fold so that it follows the recent past. Safe
// for concurrent use.
type hotKeys struct {
	mu sync.Mutex // guards everything below
	n  int
	// hashes and counts are what every sampled request scans: two dense
	// arrays (1 KiB), not 64 entries of keys 10 KiB apart.
	hashes [HotKeyCapacity]uint64
	counts [HotKeyCapacity]float64 // sampled requests, decayed at every fold
	e      [HotKeyCapacity]hotEntry
}

// add counts one sampled request for key, in slot s.
func (h *hotKeys) add(s slots.Slot, key []byte) {
	hash := xxhash.Sum64(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	// One pass finds the key or, failing that, the smallest count: a miss
	// (most samples of a wide key space) costs one scan, not two.
	low := 0
	for i := range h.n {
		if h.hashes[i] == hash && h.e[i].keyLen == len(key) && bytes.Equal(h.e[i].key[:min(len(key), MaxHotKeyBytes)], key[:min(len(key), MaxHotKeyBytes)]) {
			h.counts[i]++
			return
		}
		if h.counts[i] < h.counts[low] {
			low = i
		}
	}
	i, floor := h.n, 0.0
	if h.n < HotKeyCapacity {
		h.n++
	} else {
		// Evict the smallest count: the newcomer inherits it as its error,
		// so no key's count is ever an underestimate.
		i, floor = low, h.counts[low]
	}
	e := &h.e[i]
	h.hashes[i], h.counts[i] = hash, floor+1
	e.err, e.slot, e.keyLen = floor, s, len(key)
	copy(e.key[:], key)
}

// decay multiplies every count by f (0 < f <= 1).
func (h *hotKeys) decay(f float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.n {
		h.counts[i] *= f
		h.e[i].err *= f
	}
}

// top returns the tracked keys, hottest first, with counts scaled to
// requests per second by perSecond (sampling and decay window included).
// Keys whose count is no more than their error are left out: they may
// never have been hot.
func (h *hotKeys) top(perSecond float64) []HotKey {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]HotKey, 0, h.n)
	for i := range h.n {
		e, count := &h.e[i], h.counts[i]
		if count <= e.err || count*perSecond < 1e-9 {
			continue
		}
		n := min(e.keyLen, MaxHotKeyBytes)
		out = append(out, HotKey{
			Key: slices.Clone(e.key[:n]), Slot: e.slot,
			Rate: count * perSecond, Error: e.err * perSecond, Truncated: e.keyLen > MaxHotKeyBytes,
		})
	}
	slices.SortFunc(out, func(a, b HotKey) int {
		if a.Rate != b.Rate {
			if a.Rate > b.Rate {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.Key, b.Key)
	})
	return out
}

// hashTag returns the hash tag every key in keys shares, "" when some key
// has none or they differ.
func hashTag(keys []HotKey) string {
	tag := ""
	for i, k := range keys {
		t := slots.TaggedBytes(k.Key)
		if len(t) == len(k.Key) {
			return "" // no tag: the whole key is hashed
		}
		if i == 0 {
			tag = string(t)
		} else if string(t) != tag {
			return ""
		}
	}
	return tag
}

// decayFactor is exp(-dt/tau), the weight of the past after dt.
func decayFactor(dt, tau float64) float64 { return math.Exp(-dt / tau) }
