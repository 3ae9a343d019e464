package mover

import (
	"context"
	"time"
)

// RunWhileLeading runs part while leads() reports true, checking every
// poll, and cancels part's context as soon as it reports false (part then
// runs again at the next term). It returns when ctx ends. It lets a part
// that must run only on the mover's leader (the balancer) follow an
// executor's leadership from outside the executor.
func RunWhileLeading(ctx context.Context, leads func() bool, poll time.Duration, part interface{ Run(context.Context) error }) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	type term struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	var cur *term
	stop := func() {
		if cur != nil {
			cur.cancel()
			<-cur.done
			cur = nil
		}
	}
	defer stop()
	for {
		switch leading := leads(); {
		case leading && cur == nil:
			pctx, cancel := context.WithCancel(ctx)
			cur = &term{cancel: cancel, done: make(chan struct{})}
			go func(done chan struct{}) { defer close(done); _ = part.Run(pctx) }(cur.done)
		case !leading:
			stop()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
