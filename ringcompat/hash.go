package ringcompat

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// PointHash places keys and node points on the ring. A ring's answers depend
// on it, so every party routing with a ring must use the same one; it is
// chosen once, in Config, and never changes for a ring's lifetime.
//
// Use one of XXHash (the default for new rings), Seed000 or MD5. The zero
// value means XXHash.
type PointHash struct {
	name    string
	key     func([]byte) uint64
	keyStr  func(string) uint64
	points  func(dst []uint64, id string, n int) []uint64
	checkID func(id string) error
	// cmpID orders node ids; point ties are broken by this order, which for
	// Seed000 must be the numeric order of the uint32 ids.
	cmpID func(a, b string) int
}

// XXHash is the default point hash: a key sits at xxhash64(seed 0, key) and
// the i-th point (0-based) of node id sits at xxhash64(id + "#" + decimal(i)).
var XXHash = PointHash{
	name:   "xxhash",
	key:    xxhash.Sum64,
	keyStr: xxhash.Sum64String,
	points: func(dst []uint64, id string, n int) []uint64 {
		buf := make([]byte, 0, len(id)+21)
		buf = append(append(buf, id...), '#')
		for i := 0; i < n; i++ {
			dst = append(dst, xxhash.Sum64(strconv.AppendInt(buf, int64(i), 10)))
		}
		return dst
	},
	checkID: func(string) error { return nil },
	cmpID:   strings.Compare,
}

// Seed000 is the hash of the reference ring (a Rust implementation), bit
// for bit: a key sits at HashBytes(key) and the i-th point of node n sits at
// Mix(HashBytes(n as 4 little-endian bytes) ^ Mix(i+1)). Node ids must be
// canonical decimal uint32s ("0", "17", never "017").
var Seed000 = PointHash{
	name:   "seed000",
	key:    HashBytes,
	keyStr: hashString,
	points: func(dst []uint64, id string, n int) []uint64 {
		v, _ := strconv.ParseUint(id, 10, 32) // checkID has vetted id
		var le [4]byte
		binary.LittleEndian.PutUint32(le[:], uint32(v))
		base := HashBytes(le[:])
		for i := 0; i < n; i++ {
			dst = append(dst, Mix(base^Mix(uint64(i)+1)))
		}
		return dst
	},
	checkID: func(id string) error {
		v, err := strconv.ParseUint(id, 10, 32)
		if err != nil || strconv.FormatUint(v, 10) != id {
			return fmt.Errorf("%w: %q: the seed000 hash needs a decimal uint32 id such as \"7\"", ErrBadNodeID, id)
		}
		return nil
	},
	cmpID: func(a, b string) int {
		// Canonical decimals: shorter is smaller, equal lengths compare as text.
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	},
}

// MD5 is the hash of the published md5 ring simulation: a key sits at the first 16 hex
// digits of md5(key) read as a uint64 (the first 8 digest bytes, big-endian)
// and the i-th point of node id at the same of md5(id + "#" + decimal(i)).
// That simulation takes the first point strictly greater than the key's hash
// (Python's bisect.bisect); set Config.StrictSuccessor to reproduce it.
var MD5 = PointHash{
	name:   "md5",
	key:    md5Key,
	keyStr: md5KeyString,
	points: func(dst []uint64, id string, n int) []uint64 {
		buf := make([]byte, 0, len(id)+21)
		buf = append(append(buf, id...), '#')
		for i := 0; i < n; i++ {
			dst = append(dst, md5Key(strconv.AppendInt(buf, int64(i), 10)))
		}
		return dst
	},
	checkID: func(string) error { return nil },
	cmpID:   strings.Compare,
}

// CustomHash returns a point hash made of two functions, for rings that must
// match another implementation: key places a key, point places the i-th
// (0-based) point of node id. Both must be pure, and key must neither modify
// nor keep its argument (string keys are passed without a copy). Ties between
// points break by node id in byte order.
func CustomHash(name string, key func([]byte) uint64, point func(id string, i int) uint64) PointHash {
	return PointHash{
		name: name,
		key:  key,
		keyStr: func(s string) uint64 {
			return key(unsafe.Slice(unsafe.StringData(s), len(s)))
		},
		points: func(dst []uint64, id string, n int) []uint64 {
			for i := 0; i < n; i++ {
				dst = append(dst, point(id, i))
			}
			return dst
		},
		checkID: func(string) error { return nil },
		cmpID:   strings.Compare,
	}
}

// HashByName returns the point hash called name: "xxhash", "seed000" or
// "md5", as a command-line flag would name it.
func HashByName(name string) (PointHash, error) {
	for _, h := range []PointHash{XXHash, Seed000, MD5} {
		if h.name == name {
			return h, nil
		}
	}
	return PointHash{}, fmt.Errorf("%w: %q: use xxhash, seed000 or md5", ErrUnknownHash, name)
}

// orDefault turns the zero PointHash into XXHash.
func (h PointHash) orDefault() PointHash {
	if h.key == nil {
		return XXHash
	}
	return h
}

// String returns the hash's name, as HashByName accepts it.
func (h PointHash) String() string { return h.orDefault().name }

// Key returns the ring position of key.
func (h PointHash) Key(key []byte) uint64 { return h.orDefault().key(key) }

// KeyString returns the ring position of key.
func (h PointHash) KeyString(key string) uint64 { return h.orDefault().keyStr(key) }

// Points returns the positions of the first n points of node id, in point
// order (not sorted), or ErrBadNodeID when the hash cannot place that id.
func (h PointHash) Points(id string, n int) ([]uint64, error) {
	h = h.orDefault()
	if id == "" {
		return nil, fmt.Errorf("%w: the id is empty", ErrBadNodeID)
	}
	if err := h.checkID(id); err != nil {
		return nil, err
	}
	return h.points(make([]uint64, 0, n), id, n), nil
}

// Mix is the reference ring's splitmix64 finalizer: nearby inputs land far apart.
func Mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

const (
	fnvOffset = 0xcbf29ce484222325
	fnvPrime  = 0x100000001b3
)

// HashBytes is the reference ring's hash_bytes: FNV-1a 64 over b, then Mix.
func HashBytes(b []byte) uint64 {
	h := uint64(fnvOffset)
	for _, x := range b {
		h = (h ^ uint64(x)) * fnvPrime
	}
	return Mix(h)
}

func hashString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return Mix(h)
}

func md5Key(b []byte) uint64 {
	sum := md5.Sum(b)
	return binary.BigEndian.Uint64(sum[:8])
}

func md5KeyString(s string) uint64 {
	// Short keys are copied to the stack so that the lookup path does not
	// allocate; md5.Sum would otherwise need a heap copy of the string.
	var buf [64]byte
	if len(s) <= len(buf) {
		n := copy(buf[:], s)
		return md5Key(buf[:n])
	}
	return md5Key([]byte(s))
}
