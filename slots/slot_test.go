package slots

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/slotd/slotd/internal/vectors"
)

// loadVectors checks a slots.tsv file: key as hex, slot, xxhash64 of the
// hashed part as hex.
func loadVectors(t *testing.T, path string) int {
	t.Helper()
	return vectors.Read(t, path, func(where string, fields []string) {
		if len(fields) != 3 {
			t.Fatalf("%s: want 3 tab-separated fields, got %d", where, len(fields))
		}
		key, err := hex.DecodeString(fields[0])
		if err != nil {
			t.Fatalf("%s: key: %v", where, err)
		}
		wantSlot, err := strconv.Atoi(fields[1])
		if err != nil {
			t.Fatalf("%s: slot: %v", where, err)
		}
		wantHash, err := strconv.ParseUint(fields[2], 16, 64)
		if err != nil {
			t.Fatalf("%s: hash: %v", where, err)
		}
		if got := xxhash.Sum64(TaggedBytes(key)); got != wantHash {
			t.Errorf("%s: xxhash64(tagged(%q)) = %016x, want %016x", where, key, got, wantHash)
		}
		if got := ForKey(key).Int(); got != wantSlot {
			t.Errorf("%s: ForKey(%q) = %d, want %d", where, key, got, wantSlot)
		}
		if got := ForString(string(key)).Int(); got != wantSlot {
			t.Errorf("%s: ForString(%q) = %d, want %d", where, key, got, wantSlot)
		}
	})
}

func TestVectors(t *testing.T) {
	if n := loadVectors(t, filepath.Join("testdata", "slots.tsv")); n < 50 {
		t.Fatalf("only %d vectors in testdata/slots.tsv", n)
	}
}

// TestExtraVectors pins other implementations against ours: every slots*.tsv
// in $SLOTD_EXTRA_VECTORS must match.
func TestExtraVectors(t *testing.T) {
	files := vectors.Extra(t, "slots*.tsv")
	if len(files) == 0 {
		t.Fatalf("%s=%s holds no slots*.tsv", vectors.ExtraEnv, os.Getenv(vectors.ExtraEnv))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { loadVectors(t, f) })
	}
}

func TestTagged(t *testing.T) {
	cases := []struct{ key, want string }{
		{"", ""},
		{"foo", "foo"},
		{"{user:42}:cart", "user:42"},
		{"user:{42}", "42"},
		{"{}", "{}"},
		{"{}x", "{}x"},
		{"x{}", "x{}"},
		{"{{a}}", "{a"},
		{"a{b}c{d}", "b"},
		{"}{", "}{"},
		{"{a", "{a"},
		{"a}", "a}"},
		{"{}{b}", "{}{b}"}, // first '{' has an empty tag: whole key, as in Redis Cluster
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			if got := TaggedString(tc.key); got != tc.want {
				t.Errorf("TaggedString(%q) = %q, want %q", tc.key, got, tc.want)
			}
			if got := string(TaggedBytes([]byte(tc.key))); got != tc.want {
				t.Errorf("TaggedBytes(%q) = %q, want %q", tc.key, got, tc.want)
			}
		})
	}
}

func TestSameTagSameSlot(t *testing.T) {
	a, b := ForString("{user:42}:cart"), ForString("{user:42}:profile")
	if a != b || a != ForString("user:42") {
		t.Fatalf("hash-tagged keys differ: %v %v %v", a, b, ForString("user:42"))
	}
}

func TestNew(t *testing.T) {
	cases := []struct {
		n  int
		ok bool
	}{{0, true}, {1, true}, {Count - 1, true}, {Count, false}, {-1, false}, {99999, false}}
	for _, tc := range cases {
		s, err := New(tc.n)
		if tc.ok != (err == nil) {
			t.Errorf("New(%d) err = %v, want ok=%v", tc.n, err, tc.ok)
		}
		if tc.ok && s.Int() != tc.n {
			t.Errorf("New(%d) = %d", tc.n, s.Int())
		}
	}
}

func TestForKeyDoesNotAllocate(t *testing.T) {
	key := []byte("{user:42}:profile")
	skey := "user:1234567890ab"
	if n := testing.AllocsPerRun(100, func() { ForKey(key); ForString(skey) }); n != 0 {
		t.Fatalf("allocs per run = %v, want 0", n)
	}
}

func FuzzTagRule(f *testing.F) {
	for _, s := range []string{"", "{", "}", "{}", "{a}", "a{b}c", "{{}}", "x{y}{z}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		tag := TaggedString(key)
		if string(TaggedBytes([]byte(key))) != tag {
			t.Fatalf("string and bytes forms disagree on %q", key)
		}
		if ForString(key) != ForKey([]byte(key)) {
			t.Fatalf("ForString and ForKey disagree on %q", key)
		}
		if !strings.Contains(key, tag) {
			t.Fatalf("tag %q not inside key %q", tag, key)
		}
		if tag != key {
			// A real tag: non-empty, no '}' inside, framed by braces in the key.
			if tag == "" || strings.ContainsRune(tag, '}') || !strings.Contains(key, "{"+tag+"}") {
				t.Fatalf("bad tag %q for key %q", tag, key)
			}
			// Every key carrying the same tag lands in the same slot.
			if ForString("{"+tag+"}") != ForString(key) {
				t.Fatalf("key %q and {%s} differ", key, tag)
			}
		}
	})
}

func BenchmarkForKey(b *testing.B) {
	for _, size := range []int{16, 64} {
		key := []byte(strings.Repeat("k", size))
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			b.ReportAllocs()
			var sink Slot
			for b.Loop() {
				sink = ForKey(key)
			}
			_ = sink
		})
	}
}

func BenchmarkForString(b *testing.B) {
	key := "user:0123456789a" // 16 bytes
	b.ReportAllocs()
	for b.Loop() {
		ForString(key)
	}
}

// TestForKeyWordPath checks the word-at-a-time paths (8 to 16 bytes, up to
// 64 bytes, a '{' in the first word) against the reference (the tag rule
// with bytes.IndexByte, then xxhash64) at every length up to past them,
// with a '{' or '}' at every position and with fill bytes a faulty word
// test would confuse with '{'.
func TestForKeyWordPath(t *testing.T) {
	ref := func(k []byte) Slot {
		tag := k
		if open := bytes.IndexByte(k, '{'); open >= 0 {
			if closing := bytes.IndexByte(k[open+1:], '}'); closing > 0 {
				tag = k[open+1 : open+1+closing]
			}
		}
		return Slot{uint16(xxhash.Sum64(tag) & (Count - 1))}
	}
	for n := 0; n <= 72; n++ {
		for _, fill := range []byte{'a', 0x7a, 0x7c, 0x7f, 0xfb, 0x00, 0xff, 0x80, '}', '|', '~'} {
			key := bytes.Repeat([]byte{fill}, n)
			if got, want := ForKey(key), ref(key); got != want {
				t.Errorf("ForKey(%d x %#x) = %d, want %d", n, fill, got.Int(), want.Int())
			}
			if got, want := ForString(string(key)), ref(key); got != want {
				t.Errorf("ForString(%d x %#x) = %d, want %d", n, fill, got.Int(), want.Int())
			}
			for i := range key {
				for _, c := range []byte{'{', '}'} {
					k := bytes.Clone(key)
					k[i] = c
					if i+2 < n {
						k[i+2] = '}' // a tag of one byte when c is '{'
					}
					if got, want := ForKey(k), ref(k); got != want {
						t.Errorf("ForKey(%q) = %d, want %d", k, got.Int(), want.Int())
					}
					if got, want := ForString(string(k)), ref(k); got != want {
						t.Errorf("ForString(%q) = %d, want %d", k, got.Int(), want.Int())
					}
				}
			}
		}
	}
}

// FuzzForKey: the fast paths agree with the reference on any key.
func FuzzForKey(f *testing.F) {
	for _, s := range []string{"", "user:0123456789a", "{a}b", "a{}b", "x{y", "12345678{}", "abcdefgh{i}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, key []byte) {
		want := Slot{uint16(xxhash.Sum64(TaggedBytes(key)) & (Count - 1))}
		if got := ForKey(key); got != want {
			t.Fatalf("ForKey(%q) = %d, want %d", key, got.Int(), want.Int())
		}
		if got := ForString(string(key)); got != want {
			t.Fatalf("ForString(%q) = %d, want %d", key, got.Int(), want.Int())
		}
	})
}

func BenchmarkFloorXXHash(b *testing.B) {
	key := []byte("user:0123456789a")
	b.ReportAllocs()
	var sink uint64
	for b.Loop() {
		sink = xxhash.Sum64(key)
	}
	_ = sink
}
