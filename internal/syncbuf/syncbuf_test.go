package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWrites: writers and a reader at once (run with -race);
// every write is kept whole.
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if _, err := b.Write([]byte("abc\n")); err != nil {
					t.Error(err)
				}
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "abc\n"); got != 800 {
		t.Fatalf("%d whole writes, want 800", got)
	}
}
