package directory

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/slotd/slotd/internal/etcdtest"
)

func TestPlanStoreCAS(t *testing.T) {
	d := newDir(t, etcdtest.New(t), nil)
	ctx := testCtx(t)
	if err := d.CreatePlan(ctx, "p1", []byte("0")); err != nil {
		t.Fatal(err)
	}
	if err := d.CreatePlan(ctx, "p1", []byte("x")); !errors.Is(err, ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	// Eight writers each add one; compare-and-swap loses no increment.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.UpdatePlan(ctx, "p1", func(old []byte) ([]byte, error) {
				n, _ := strconv.Atoi(string(old))
				return []byte(strconv.Itoa(n + 1)), nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := d.Plan(ctx, "p1")
	if err != nil || string(got) != "8" {
		t.Fatalf("plan = %q, %v; want 8", got, err)
	}
	if err := d.UpdatePlan(ctx, "nope", func(b []byte) ([]byte, error) { return b, nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update missing: %v", err)
	}
	stop := errors.New("stop")
	if err := d.UpdatePlan(ctx, "p1", func(b []byte) ([]byte, error) { return nil, stop }); err != stop {
		t.Fatalf("edit error not returned: %v", err)
	}
}
