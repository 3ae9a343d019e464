package directory

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/slotd/slotd/internal/etcdtest"
)

func TestAutoPolicy(t *testing.T) {
	ctx := testCtx(t)
	clock := newFakeClock()
	d := newDir(t, etcdtest.New(t), func(c *Config) { c.Now = clock.Now })

	p, err := d.AutoPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p != DefaultAutoPolicy() || p.Enabled || p.Frozen {
		t.Fatalf("no policy stored: got %+v, want the defaults (off)", p)
	}
	if p.Tolerance != 0.10 || p.Window != 10*time.Minute || p.Interval != 5*time.Minute || p.BalanceBy != "auto" {
		t.Fatalf("defaults: %+v", p)
	}

	p, err = d.UpdateAutoPolicy(ctx, "alice", "scale-out week", func(p *AutoPolicy) error {
		p.Enabled, p.Window = true, 6*time.Second
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.AutoPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != p || !got.Enabled || got.Window != 6*time.Second || got.UpdatedBy != "alice" || got.Reason != "scale-out week" || !got.Updated.Equal(clock.Now()) {
		t.Fatalf("stored %+v, read back %+v", p, got)
	}

	// Invalid policies are refused and nothing changes.
	for name, edit := range map[string]func(*AutoPolicy){
		"tolerance 0":        func(p *AutoPolicy) { p.Tolerance = 0 },
		"tolerance 1":        func(p *AutoPolicy) { p.Tolerance = 1 },
		"negative window":    func(p *AutoPolicy) { p.Window = -time.Second },
		"negative interval":  func(p *AutoPolicy) { p.Interval = -time.Second },
		"negative budget":    func(p *AutoPolicy) { p.BudgetMoves = -1 },
		"negative bytes":     func(p *AutoPolicy) { p.BudgetBytes = -1 },
		"unknown balance-by": func(p *AutoPolicy) { p.BalanceBy = "keys" },
	} {
		_, err := d.UpdateAutoPolicy(ctx, "bob", "", func(p *AutoPolicy) error { edit(p); return nil })
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
	if after, _ := d.AutoPolicy(ctx); after != got {
		t.Fatalf("refused edits changed the policy: %+v, was %+v", after, got)
	}

	// Concurrent writers each keep their change (compare-and-swap, retried).
	var wg sync.WaitGroup
	for i, edit := range []func(*AutoPolicy){
		func(p *AutoPolicy) { p.Frozen = true },
		func(p *AutoPolicy) { p.Tolerance = 0.2 },
		func(p *AutoPolicy) { p.BudgetMoves = 7 },
		func(p *AutoPolicy) { p.BalanceBy = "bytes" },
	} {
		wg.Go(func() {
			if _, err := d.UpdateAutoPolicy(ctx, "w", "", func(p *AutoPolicy) error { edit(p); return nil }); err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	final, _ := d.AutoPolicy(ctx)
	if !final.Frozen || final.Tolerance != 0.2 || final.BudgetMoves != 7 || final.BalanceBy != "bytes" || !final.Enabled {
		t.Fatalf("a concurrent change was lost: %+v", final)
	}
}

func TestAutoState(t *testing.T) {
	ctx := testCtx(t)
	d := newDir(t, etcdtest.New(t), nil)
	s, rev, err := d.AutoState(ctx)
	if err != nil || rev != 0 || s.Failures != 0 || s.LastPlan != "" {
		t.Fatalf("no state: %+v rev %d err %v", s, rev, err)
	}
	want := AutoState{Failures: 2, BackoffUntil: time.Unix(100, 0).UTC(), LastPlan: "p1",
		Recent: []AutoPlanSpend{{Plan: "p1", At: time.Unix(50, 0).UTC(), Moves: 3, Bytes: 4096}}}
	if err := d.PutAutoState(ctx, 0, want); err != nil {
		t.Fatal(err)
	}
	if err := d.PutAutoState(ctx, 0, AutoState{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second create: %v, want ErrConflict", err)
	}
	got, rev, err := d.AutoState(ctx)
	if err != nil || rev == 0 || got.Failures != 2 || !got.BackoffUntil.Equal(want.BackoffUntil) || len(got.Recent) != 1 || got.Recent[0].Bytes != 4096 {
		t.Fatalf("read back %+v rev %d err %v", got, rev, err)
	}
	if err := d.PutAutoState(ctx, rev, AutoState{LastPlan: "p2"}); err != nil {
		t.Fatal(err)
	}
	if err := d.PutAutoState(ctx, rev, AutoState{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a stale revision: %v, want ErrConflict", err)
	}
}
