package directory

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slotd/slotd/slots"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	_, d, snap := setup(t, 2, func(c *Config) { c.Registerer = reg })
	ctx := testCtx(t)
	s := slots.MustNew(ownerSlot(t, snap, "n0"))
	if _, err := d.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: "n1"}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(d.m.version); got != float64(snap.Version+1) {
		t.Errorf("slotd_directory_version = %v, want %d", got, snap.Version+1)
	}
	_, err := d.BeginMove(ctx, MoveSpec{Slot: slots.MustNew(ownerSlot(t, snap, "n1")), From: "n1", To: "n0", ExpectVersion: snap.Version})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("stale expectation: err = %v", err)
	}
	if got := testutil.ToFloat64(d.m.conflicts); got != 1 {
		t.Errorf("slotd_directory_conflicts_total = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(reg, "slotd_directory_txn_duration_seconds"); n != 1 {
		t.Errorf("txn duration series = %d, want 1 (applied)", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("metric lint: %v %v", problems, err)
	}
	// A second Directory on the same registry must fail loudly, not share.
	if _, err := New(Config{Client: d.cli, Registerer: reg}); err == nil {
		t.Error("registering the metrics twice succeeded")
	}
}
