package linz

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slotd/slotd/slotkv/workload"
)

// TestHistoryFile checks a history an e2e run saved
// (LINZ_HISTORY=/tmp/slotd-e2e-artifacts/NAME-history.json), to study a
// failure without rerunning the cluster.
func TestHistoryFile(t *testing.T) {
	path := os.Getenv("LINZ_HISTORY")
	if path == "" {
		t.Skip("set LINZ_HISTORY to a saved history")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ops []workload.Op
	if err := json.Unmarshal(b, &ops); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := Check(workload.History{Ops: ops}, time.Minute)
	t.Logf("%d operations: %s in %v", res.Ops, res.Outcome, time.Since(start))
	if !res.OK() {
		out := filepath.Join(filepath.Dir(path), filepath.Base(path)+".html")
		if err := res.Visualize(out); err != nil {
			t.Fatal(err)
		}
		t.Fatalf("not linearizable: %s; see %s", res.Outcome, out)
	}
}
