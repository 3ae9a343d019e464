package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slotd/slotd/api/redirect"
	"github.com/slotd/slotd/internal/backoff"
	"github.com/slotd/slotd/slots"
)

// Errors returned by Do. Each wraps the last answer it got.
var (
	// ErrTooManyRedirects: every attempt was redirected (or told to wait) and
	// the attempts ran out. The map may be catching up; the call may be
	// retried later.
	ErrTooManyRedirects = errors.New("client: too many redirects")
	// ErrSlotFenced: the last attempt found the slot fenced for a move; retry
	// in a moment.
	ErrSlotFenced = errors.New("client: slot fenced for a move")
	// ErrBadRedirect: a store redirected a key to a slot that is not the
	// key's slot. The store is wrong; Do does not retry.
	ErrBadRedirect = errors.New("client: redirect for the wrong slot")
)

// RequestFunc sends one request for a key to the store node at addr. asking
// is true when the request follows an ASK redirect: the function must flag
// it (redirect.WithAsking for gRPC stores). A MOVED or ASK answer is
// returned as an error that redirect.FromError recognizes (a gRPC status
// with the Redirect detail, or a redirect.Redirect value, e.g. from
// redirect.Parse); a fenced slot likewise as redirect.Fenced. Any other
// error ends Do with that error.
type RequestFunc func(ctx context.Context, addr string, asking bool) error

// Do runs fn against the owner of key's slot and follows redirects:
//
//   - MOVED newer than the map: the slot is patched at once, a fresh map is
//     requested in the background, and the request is retried at once at the
//     new owner.
//   - MOVED not newer than the map: the map is kept (it never moves back) and
//     the request is retried after a backoff, at the map's owner.
//   - ASK: one request goes to the target, flagged asking; the map is kept.
//     An ASK answer to an asking request is not followed.
//   - FENCED: the request is retried after the hinted delay or a backoff.
//
// At most Options.MaxAttempts requests answered other than FENCED are
// sent; a fenced slot is retried for up to Options.FenceWait from its first
// FENCED answer (a fence lasts as long as the mover's commit). No wait
// outlives ctx.
// Errors: ErrNoMap, ErrTooManyRedirects, ErrSlotFenced, ErrBadRedirect (all
// wrapping the last answer), ctx's error, or fn's own error unchanged.
func (c *Client) Do(ctx context.Context, key []byte, fn RequestFunc) error {
	return c.do(ctx, slots.ForKey(key), fn)
}

// DoString is Do for a string key.
func (c *Client) DoString(ctx context.Context, key string, fn RequestFunc) error {
	return c.do(ctx, slots.ForString(key), fn)
}

// movedTo is a MOVED answer reduced to what patching the map needs.
type movedTo struct {
	slot    slots.Slot
	owner   string
	addr    string
	version uint64
}

func (c *Client) do(ctx context.Context, s slots.Slot, fn RequestFunc) error {
	var (
		last       error         // the last answer, for the final error
		wait       time.Duration // before the next attempt
		askAddr    string        // the next attempt follows this ASK
		attempt    int           // requests counted against MaxAttempts
		sent       int           // every request, FENCED answers included
		fenceSince time.Time     // the first FENCED answer of the call
		fences     int           // FENCED answers so far
	)
	for attempt < c.opts.MaxAttempts {
		if wait > 0 && !backoff.SleepContext(ctx, wait) {
			return fmt.Errorf("client: slot %d: %w after %d attempts; last answer: %v", s.Int(), context.Cause(ctx), sent, last)
		}
		wait = 0
		addr, asking := askAddr, askAddr != ""
		askAddr = ""
		if !asking {
			m := c.cur.Load()
			if m.Empty() { // noMap too
				if last != nil {
					return fmt.Errorf("%w (slot %d); last answer: %w", ErrNoMap, s.Int(), last)
				}
				return ErrNoMap
			}
			addr = m.RouteSlot(s).Addr()
		}

		err := fn(ctx, addr, asking)
		sent++
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		last = err

		if f, ok := redirect.FencedFromError(err); ok {
			if f.Slot != s {
				return fmt.Errorf("%w: sent slot %d to %s, answer %q", ErrBadRedirect, s.Int(), addr, f.String())
			}
			// A fence lasts as long as the mover's commit: ride it out for
			// FenceWait, whatever the attempts left.
			now := time.Now()
			if fences == 0 {
				fenceSince = now
			}
			fences++
			left := c.opts.FenceWait - now.Sub(fenceSince)
			if left <= 0 {
				return fmt.Errorf("%w: slot %d still fenced after %v (%d attempts); last answer: %w",
					ErrSlotFenced, s.Int(), now.Sub(fenceSince).Round(time.Millisecond), sent, last)
			}
			wait = c.retry.Delay(fences - 1)
			if f.RetryAfter > 0 {
				wait = min(f.RetryAfter, c.opts.MaxRetryBackoff)
			}
			wait = min(wait, left)
			continue
		}
		attempt++
		if r, ok := redirect.FromError(err); ok {
			if r.Slot != s {
				return fmt.Errorf("%w: sent slot %d to %s, answer %q", ErrBadRedirect, s.Int(), addr, r.String())
			}
			switch r.Kind {
			case redirect.Moved:
				c.m.redirects.WithLabelValues("moved").Inc()
				if !c.patch(movedTo{slot: s, owner: r.Owner, addr: r.Addr, version: r.Version}) {
					// Our map is at least as new as the answer: the node is
					// behind. Give it a moment rather than follow it back.
					wait = c.retry.Delay(attempt - 1)
				}
				c.requestRefresh()
			case redirect.Ask:
				c.m.redirects.WithLabelValues("ask").Inc()
				if asking {
					// The target does not take it either: back to the map's
					// owner after a pause, never ASK to ASK.
					wait = c.retry.Delay(attempt - 1)
				} else {
					askAddr = r.Addr
				}
			default:
				return fmt.Errorf("%w: unknown redirect kind in %v", ErrBadRedirect, err)
			}
			continue
		}
		return err // the caller's own error: not ours to retry
	}
	return fmt.Errorf("%w: slot %d after %d attempts; last answer: %w", ErrTooManyRedirects, s.Int(), sent, last)
}
