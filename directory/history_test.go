package directory

import (
	"testing"
)

// TestHistoryTrim: a write deletes the history entries it pushes out
// beyond HistoryLimit, not a range from the first version (whose cost
// grows with every version etcd has not compacted yet), and every
// historySweep versions it trims from the start, so entries a larger limit
// once kept go too.
func TestHistoryTrim(t *testing.T) {
	c, d, _ := setup(t, 2, func(c *Config) { c.HistoryLimit = 10 })
	ctx := testCtx(t)
	write := func(d *Directory, n int) {
		t.Helper()
		for i := range n {
			if _, err := d.SetWeight(ctx, "n0", 2+i%5, "t"); err != nil {
				t.Fatal(err)
			}
		}
	}
	kept := func() int {
		t.Helper()
		h, err := d.History(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(h)
	}
	write(d, 12)
	if n := kept(); n != 10 {
		t.Fatalf("%d history entries kept, want the limit, 10", n)
	}

	// A smaller limit: each write drops only what it pushes out...
	small, err := New(Config{Client: c.Client(), HistoryLimit: 3})
	if err != nil {
		t.Fatal(err)
	}
	small.historySweep = 1 << 62
	write(small, 2)
	if n := kept(); n != 10 {
		t.Fatalf("%d history entries kept after two writes at limit 3, want 10: each write drops only what it pushes out", n)
	}
	// ...until a sweep.
	small.historySweep = 4
	write(small, 4)
	if n := kept(); n != 3 {
		t.Fatalf("%d history entries kept after a sweep at limit 3, want 3", n)
	}
}
