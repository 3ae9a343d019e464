package e2e

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slotd/slotd/e2e/harness"
)

func TestMain(m *testing.M) {
	code := harness.Main(m)
	printResults()
	if code == 0 {
		// The SDK's and gRPC's goroutines must all be gone once every test
		// closed its clients.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// full reports whether the long scenarios run (E2E_FULL=1).
func full(t *testing.T) {
	if os.Getenv("E2E_FULL") == "" {
		t.Skip("long scenario: set E2E_FULL=1 (make e2e)")
	}
}

// result is one scenario's row of the summary table.
type result struct {
	scenario     string
	ops, errs    int
	lost         int
	linearizable string
	elapsed      time.Duration
}

var (
	resultsMu sync.Mutex // guards results
	results   []result
)

func addResult(r result) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, r)
}

func printResults() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(results) == 0 {
		return
	}
	// Scenario names start with their number: print them in that order.
	sort.SliceStable(results, func(i, j int) bool { return results[i].scenario < results[j].scenario })
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-34s %10s %13s %11s %13s %8s\n", "scenario", "operations", "client errors", "lost writes", "linearizable", "time")
	for _, r := range results {
		fmt.Fprintf(&b, "%-34s %10d %13d %11d %13s %7.1fs\n", r.scenario, r.ops, r.errs, r.lost, r.linearizable, r.elapsed.Seconds())
	}
	fmt.Print(b.String())
}
