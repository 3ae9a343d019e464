package vectors

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.tsv")
	body := "# header\n\nH\tkey\t01\n   \nA\tk\tn1\tn1,n2\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var got [][]string
	var where []string
	n := Read(t, path, func(w string, fields []string) {
		where = append(where, w)
		got = append(got, fields)
	})
	want := [][]string{{"H", "key", "01"}, {"A", "k", "n1", "n1,n2"}}
	if n != 2 || !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("Read = %d lines %q, want 2 lines %q", n, got, want)
	}
	if wantWhere := []string{path + ":3", path + ":5"}; !slices.Equal(where, wantWhere) {
		t.Fatalf("where = %q, want %q", where, wantWhere)
	}
}

func TestExtra(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"slots.tsv", "slots_go.tsv", "ring_seed000.tsv"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(ExtraEnv, dir)
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"slots*.tsv", []string{"slots.tsv", "slots_go.tsv"}},
		{"ring_seed000*.tsv", []string{"ring_seed000.tsv"}},
		{"none*.tsv", nil},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			var got []string
			for _, f := range Extra(t, tc.pattern) {
				got = append(got, filepath.Base(f))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Extra(%q) = %q, want %q", tc.pattern, got, tc.want)
			}
		})
	}
}

// TestExtraUnset: with no folder named, Extra skips the test that asked.
func TestExtraUnset(t *testing.T) {
	t.Setenv(ExtraEnv, "")
	var sub *testing.T
	t.Run("unset", func(t *testing.T) {
		sub = t
		Extra(t, "slots*.tsv")
		t.Error("Extra returned with " + ExtraEnv + " unset")
	})
	if !sub.Skipped() {
		t.Fatal("Extra did not skip the test")
	}
}
