package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slotd/slotd/api/redirect"
	"github.com/slotd/slotd/internal/maptest"
	"github.com/slotd/slotd/slots"
)

// TestDoRidesThroughFence: FENCED answers do not count against
// MaxAttempts; Do retries a fenced slot until FenceWait has passed since
// the first of them, then says how long the slot stayed fenced.
func TestDoRidesThroughFence(t *testing.T) {
	key := []byte("k")
	s := slots.ForKey(key)
	fenced := redirect.Fenced{Slot: s, Version: 10, RetryAfter: time.Microsecond}.Err()
	tests := []struct {
		name      string
		fenceWait time.Duration
		answer    func(n int, addr string, asking bool) error
		wantErr   error
		wantCalls int // 0: not checked
	}{
		{"a fence longer than MaxAttempts answers, within FenceWait", time.Hour,
			func(n int, _ string, _ bool) error {
				if n <= 12 {
					return fenced
				}
				return nil
			}, nil, 13},
		{"redirects still count: four stale MOVED around the fence", time.Hour,
			func(n int, _ string, _ bool) error {
				if n%2 == 0 {
					return fenced
				}
				return redirect.Redirect{Kind: redirect.Moved, Slot: s, Owner: "a", Addr: "127.0.0.1:1", Version: 1}.Err()
			}, ErrTooManyRedirects, 9},
		{"a fence that outlasts FenceWait", 20 * time.Millisecond,
			func(int, string, bool) error { return fenced }, ErrSlotFenced, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := maptest.NewState(baseMap(t, 10))
			srv := startServer(t, st, "127.0.0.1:0")
			defer srv.Stop()
			c := newClientWith(t, func(o *Options) { o.Endpoints = []string{srv.Addr()}; o.FenceWait = tc.fenceWait })
			store := &fakeStore{answer: tc.answer}
			err := c.Do(context.Background(), key, store.fn)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Do = %v, want %v", err, tc.wantErr)
			}
			if errors.Is(tc.wantErr, ErrSlotFenced) && !strings.Contains(err.Error(), "still fenced after") {
				t.Fatalf("Do = %v, want it to say how long the slot stayed fenced", err)
			}
			if got := len(store.got()); tc.wantCalls != 0 && got != tc.wantCalls {
				t.Fatalf("%d requests, want %d", got, tc.wantCalls)
			}
		})
	}
}
