package ringcompat

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// loadRingVectors checks a ring_seed000.tsv file (format in its header)
// against the Seed000 hash and returns how many lines it checked.
func loadRingVectors(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open vectors: %v", err)
	}
	defer f.Close()
	var r *Ring
	n := 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "#") || strings.TrimSpace(text) == "" {
			continue
		}
		fields := strings.Split(text, "\t")
		where := path + ":" + strconv.Itoa(line)
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
			t.Fatalf("%s: unknown line %q", where, text)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSeed000Vectors(t *testing.T) {
	if n := loadRingVectors(t, filepath.Join("testdata", "ring_seed000.tsv")); n < 40 {
		t.Fatalf("only %d vectors in testdata/ring_seed000.tsv", n)
	}
}

// TestExtraVectors pins other implementations against ours: every
// ring_seed000*.tsv in $SLOTD_EXTRA_VECTORS must match.
func TestExtraVectors(t *testing.T) {
	dir := os.Getenv("SLOTD_EXTRA_VECTORS")
	if dir == "" {
		t.Skip("SLOTD_EXTRA_VECTORS not set")
	}
	files, err := filepath.Glob(filepath.Join(dir, "ring_seed000*.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		// The variable is shared with the slots vectors; a directory holding
		// only those is not an error here.
		t.Skipf("SLOTD_EXTRA_VECTORS=%s holds no ring_seed000*.tsv", dir)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { loadRingVectors(t, f) })
	}
}
