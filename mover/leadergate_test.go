package mover

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotd/slotd/internal/waitfor"
)

// countingPart counts its runs and how many are running.
type countingPart struct{ runs, running atomic.Int32 }

func (p *countingPart) Run(ctx context.Context) error {
	p.runs.Add(1)
	p.running.Add(1)
	defer p.running.Add(-1)
	<-ctx.Done()
	return ctx.Err()
}

// TestRunWhileLeading follows a fake leader: the part runs only while it
// leads, stops when it loses the lead, runs again in the next term, and
// nothing outlives the gate.
func TestRunWhileLeading(t *testing.T) {
	var leading atomic.Bool
	p := &countingPart{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunWhileLeading(ctx, leading.Load, time.Millisecond, p) }()
	state := func(runs, running int32) func() error {
		return func() error {
			if r, n := p.runs.Load(), p.running.Load(); r != runs || n != running {
				return errors.New("not yet")
			}
			return nil
		}
	}
	waitfor.Err(t, 10*time.Second, "not leading: not running", state(0, 0))
	leading.Store(true)
	waitfor.Err(t, 10*time.Second, "leading: one run", state(1, 1))
	leading.Store(false)
	waitfor.Err(t, 10*time.Second, "lost the lead: stopped", state(1, 0))
	leading.Store(true)
	waitfor.Err(t, 10*time.Second, "next term: a second run", state(2, 1))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunWhileLeading returned %v", err)
	}
	if n := p.running.Load(); n != 0 {
		t.Fatalf("%d runs outlive the gate", n)
	}
}
