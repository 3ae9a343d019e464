// Package backoff is the project's one capped, jittered exponential backoff:
// the wait between retries of a watch that broke, an election that failed, a
// transaction that lost a race. Every retry loop outside a library with its
// own (gRPC's reconnects) uses it, so all of them grow, cap and spread the
// same way.
//
// The n-th wait (from 0) is Initial * Factor^n, capped at Max, then
// jittered down by up to Jitter of itself: with Jitter 0.5 a wait of 1s
// becomes one in [0.5s, 1s], so that many processes that failed together do
// not retry together.
//
// Usage:
//
//	b := backoff.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.5}
//	for {
//		err := try(ctx)
//		if err == nil {
//			b.Reset()
//			continue
//		}
//		if !b.Sleep(ctx) {
//			return ctx.Err()
//		}
//	}
package backoff
