package ringcompat

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slotd/slotd/internal/vectors"
)

// loadRingVectors checks a ring_seed000.tsv file (format in its header)
// against the Seed000 hash and returns how many lines it checked.
func loadRingVectors(t *testing.T, path string) int {
	t.Helper()
	var r *Ring
	return vectors.Read(t, path, func(where string, fields []string) {
		switch {
		case fields[0] == "H" && len(fields) == 3:
			want, err := strconv.ParseUint(fields[2], 16, 64)
			if err != nil {
				t.Fatalf("%s: hash: %v", where, err)
			}
			if got := Seed000.Key([]byte(fields[1])); got != want {
				t.Errorf("%s: hash_bytes(%q) = %016x, want %016x", where, fields[1], got, want)
			}
			if got := Seed000.KeyString(fields[1]); got != want {
				t.Errorf("%s: KeyString(%q) = %016x, want %016x", where, fields[1], got, want)
			}
		case fields[0] == "R" && len(fields) == 2:
			var nodes []Node
			for _, spec := range strings.Split(fields[1], ",") {
				id, v, ok := strings.Cut(spec, ":")
				vnodes, err := strconv.Atoi(v)
				if !ok || err != nil {
					t.Fatalf("%s: bad node spec %q", where, spec)
				}
				// The vector's per-node vnodes become the weight, at one point per unit.
				nodes = append(nodes, Node{ID: id, Weight: vnodes})
			}
			var err error
			r, err = New(Config{Hash: Seed000, VNodes: 1}, nodes...)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		case fields[0] == "A" && len(fields) == 4:
			if r == nil {
				t.Fatalf("%s: A line before any R line", where)
			}
			key := fields[1]
			if got, _ := r.LookupString(key); got != fields[2] {
				t.Errorf("%s: LookupString(%q) = %s, want %s", where, key, got, fields[2])
			}
			if got, _ := r.Lookup([]byte(key)); got != fields[2] {
				t.Errorf("%s: Lookup(%q) = %s, want %s", where, key, got, fields[2])
			}
			want := strings.Split(fields[3], ",")
			if got := r.ReplicasString(key, len(want)); !slices.Equal(got, want) {
				t.Errorf("%s: ReplicasString(%q, %d) = %v, want %v", where, key, len(want), got, want)
			}
			if got := r.Replicas([]byte(key), len(want)); !slices.Equal(got, want) {
				t.Errorf("%s: Replicas(%q, %d) = %v, want %v", where, key, len(want), got, want)
			}
		default:
			t.Fatalf("%s: unknown line %q", where, strings.Join(fields, "\t"))
		}
	})
}

func TestSeed000Vectors(t *testing.T) {
	if n := loadRingVectors(t, filepath.Join("testdata", "ring_seed000.tsv")); n < 40 {
		t.Fatalf("only %d vectors in testdata/ring_seed000.tsv", n)
	}
}

// TestExtraVectors pins other implementations against ours: every
// ring_seed000*.tsv in $SLOTD_EXTRA_VECTORS must match.
func TestExtraVectors(t *testing.T) {
	files := vectors.Extra(t, "ring_seed000*.tsv")
	if len(files) == 0 {
		// The variable is shared with the slots vectors; a directory holding
		// only those is not an error here.
		t.Skipf("%s=%s holds no ring_seed000*.tsv", vectors.ExtraEnv, os.Getenv(vectors.ExtraEnv))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { loadRingVectors(t, f) })
	}
}
