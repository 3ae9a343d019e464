package directory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestThrottleAndPlans(t *testing.T) {
	_, d, _ := setup(t, 1, nil)
	ctx := testCtx(t)
	if _, ok, err := d.Throttle(ctx); err != nil || ok {
		t.Fatalf("throttle before set: ok=%v err=%v", ok, err)
	}
	if err := d.SetThrottle(ctx, 1<<20); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := d.Throttle(ctx); err != nil || !ok || v != 1<<20 {
		t.Fatalf("throttle = %d %v %v", v, ok, err)
	}
	if err := d.PutPlan(ctx, "p2", []byte("two")); err != nil {
		t.Fatal(err)
	}
	if err := d.PutPlan(ctx, "p1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	ids, err := d.PlanIDs(ctx)
	if err != nil || !slices.Equal(ids, []string{"p1", "p2"}) {
		t.Fatalf("plan ids = %v %v", ids, err)
	}
	if b, err := d.Plan(ctx, "p1"); err != nil || string(b) != "one" {
		t.Fatalf("plan p1 = %q %v", b, err)
	}
	// Keys oldest first, whatever the ids; a rewrite moves Rev, not Created.
	if err := d.PutPlan(ctx, "p2", []byte("two, again")); err != nil {
		t.Fatal(err)
	}
	keys, at, err := d.PlanKeys(ctx)
	if err != nil || len(keys) != 2 || keys[0].ID != "p2" || keys[1].ID != "p1" {
		t.Fatalf("plan keys = %+v %v; want p2 then p1", keys, err)
	}
	if p2, p1 := keys[0], keys[1]; !(p2.Created < p1.Created && p1.Created == p1.Rev && p2.Rev > p1.Rev && at >= p2.Rev) {
		t.Fatalf("plan keys = %+v at %d: want p2 created first, rewritten last", keys, at)
	}
	if err := d.DeletePlans(ctx, "p1", "bad id/"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("delete with a bad id: %v", err)
	}
	if _, err := d.Plan(ctx, "p1"); err != nil {
		t.Fatalf("a delete with a bad id deleted p1: %v", err)
	}
	if err := d.DeletePlans(ctx, "p1", "never-stored"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Plan(ctx, "p1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted plan: %v", err)
	}
	// More than one transaction's worth.
	many := make([]string, planDeletesPerTxn+20)
	for i := range many {
		many[i] = fmt.Sprintf("q%03d", i)
		if err := d.CreatePlan(ctx, many[i], []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DeletePlans(ctx, many...); err != nil {
		t.Fatal(err)
	}
	if ids, err := d.PlanIDs(ctx); err != nil || !slices.Equal(ids, []string{"p2"}) {
		t.Fatalf("after deleting %d plans: %v %v", len(many), ids, err)
	}
}

func TestWatchThrottle(t *testing.T) {
	_, d, _ := setup(t, 1, nil)
	// None set: the first call says so, and the watcher needs no read of
	// its own to learn it (the mover applies its default).
	unset, stop := context.WithCancel(testCtx(t))
	first := make(chan bool, 1)
	stopped := make(chan error, 1)
	go func() {
		stopped <- d.WatchThrottle(unset, func(v int64, set bool) {
			select {
			case first <- set || v != 0:
			default:
			}
		})
	}()
	if <-first {
		t.Fatal("first call with no throttle set says one is set")
	}
	stop()
	<-stopped
	ctx, cancel := context.WithCancel(testCtx(t))
	if err := d.SetThrottle(ctx, 100); err != nil {
		t.Fatal(err)
	}
	got := make(chan int64, 16)
	done := make(chan error, 1)
	go func() {
		done <- d.WatchThrottle(ctx, func(v int64, set bool) {
			if set {
				got <- v
			}
		})
	}()
	if v := <-got; v != 100 {
		t.Fatalf("first value %d, want the current 100", v)
	}
	if err := d.SetThrottle(ctx, 200); err != nil {
		t.Fatal(err)
	}
	if v := <-got; v != 200 {
		t.Fatalf("after set: %d, want 200", v)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchThrottle returned %v, want context.Canceled", err)
	}
}
