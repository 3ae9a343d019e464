package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slotd/slotd/api/redirect"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/internal/maptest"
	"github.com/slotd/slotd/slots"
)

// call records one request Do made.
type call struct {
	addr   string
	asking bool
}

// fakeStore answers Do's requests with a scripted function and records them.
type fakeStore struct {
	mu     sync.Mutex
	calls  []call
	answer func(n int, addr string, asking bool) error
}

func (f *fakeStore) fn(_ context.Context, addr string, asking bool) error {
	f.mu.Lock()
	f.calls = append(f.calls, call{addr, asking})
	n := len(f.calls)
	f.mu.Unlock()
	return f.answer(n, addr, asking)
}

func (f *fakeStore) got() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func TestDoRedirects(t *testing.T) {
	key := []byte("{user:42}:cart")
	s := slots.ForKey(key)
	owner := testNodes[s.Int()%3]
	other := testNodes[(s.Int()+1)%3]
	third := testNodes[(s.Int()+2)%3]
	movedTo := func(n slotmap.Node, v uint64) error {
		return redirect.Redirect{Kind: redirect.Moved, Slot: s, Owner: n.ID, Addr: n.Addr, Version: v}.Err()
	}
	askTo := func(n slotmap.Node) error {
		return redirect.Redirect{Kind: redirect.Ask, Slot: s, Owner: n.ID, Addr: n.Addr, Version: 10}.Err()
	}
	errStore := errors.New("store: disk full")

	tests := []struct {
		name      string
		answer    func(n int, addr string, asking bool) error
		wantErr   error // nil for success
		wantCalls []call
		wantOwner string // the map's owner of s afterwards
		wantSlotV uint64 // the map's version for s afterwards
	}{
		{
			name:      "owner answers",
			answer:    func(int, string, bool) error { return nil },
			wantCalls: []call{{owner.Addr, false}},
			wantOwner: owner.ID, wantSlotV: 10,
		},
		{
			name: "newer MOVED is applied at once",
			answer: func(_ int, addr string, _ bool) error {
				if addr == owner.Addr {
					return movedTo(other, 11)
				}
				return nil
			},
			wantCalls: []call{{owner.Addr, false}, {other.Addr, false}},
			wantOwner: other.ID, wantSlotV: 11,
		},
		{
			name: "newer MOVED in text form",
			answer: func(_ int, addr string, _ bool) error {
				if addr == owner.Addr {
					r, err := redirect.Parse(fmt.Sprintf("MOVED %d %s 12", s.Int(), third.Addr))
					if err != nil {
						t.Fatal(err)
					}
					return fmt.Errorf("text store: %w", r)
				}
				return nil
			},
			wantCalls: []call{{owner.Addr, false}, {third.Addr, false}},
			wantOwner: third.ID, wantSlotV: 12,
		},
		{
			name:      "older MOVED never rolls the map back",
			answer:    func(int, string, bool) error { return movedTo(other, 9) },
			wantErr:   ErrTooManyRedirects,
			wantCalls: []call{{owner.Addr, false}, {owner.Addr, false}, {owner.Addr, false}, {owner.Addr, false}, {owner.Addr, false}},
			wantOwner: owner.ID, wantSlotV: 10,
		},
		{
			name: "ASK sends one asking request and keeps the map",
			answer: func(_ int, addr string, asking bool) error {
				if addr == owner.Addr {
					return askTo(other)
				}
				if !asking {
					t.Error("request to the ASK target is not flagged asking")
				}
				return nil
			},
			wantCalls: []call{{owner.Addr, false}, {other.Addr, true}},
			wantOwner: owner.ID, wantSlotV: 10,
		},
		{
			name:    "ASK is never followed from an asking request",
			answer:  func(int, string, bool) error { return askTo(other) },
			wantErr: ErrTooManyRedirects,
			wantCalls: []call{{owner.Addr, false}, {other.Addr, true}, {owner.Addr, false},
				{other.Addr, true}, {owner.Addr, false}},
			wantOwner: owner.ID, wantSlotV: 10,
		},
		{
			name: "two stores bouncing MOVED stop after MaxAttempts",
			answer: func(n int, addr string, _ bool) error {
				if addr == owner.Addr {
					return movedTo(other, uint64(10+n))
				}
				return movedTo(owner, uint64(10+n))
			},
			wantErr: ErrTooManyRedirects,
			wantCalls: []call{{owner.Addr, false}, {other.Addr, false}, {owner.Addr, false},
				{other.Addr, false}, {owner.Addr, false}},
			wantOwner: other.ID, wantSlotV: 15,
		},
		{
			name: "fenced slot is retried",
			answer: func(n int, _ string, _ bool) error {
				if n <= 2 {
					return redirect.Fenced{Slot: s, Version: 10, RetryAfter: time.Millisecond}.Err()
				}
				return nil
			},
			wantCalls: []call{{owner.Addr, false}, {owner.Addr, false}, {owner.Addr, false}},
			wantOwner: owner.ID, wantSlotV: 10,
		},
		{
			name:      "the store's own error is returned as is",
			answer:    func(int, string, bool) error { return errStore },
			wantErr:   errStore,
			wantCalls: []call{{owner.Addr, false}},
			wantOwner: owner.ID, wantSlotV: 10,
		},
		{
			name: "redirect for another slot is refused",
			answer: func(int, string, bool) error {
				return redirect.Redirect{Kind: redirect.Moved, Slot: slots.MustNew((s.Int() + 1) % slots.Count), Addr: other.Addr, Version: 99}.Err()
			},
			wantErr:   ErrBadRedirect,
			wantCalls: []call{{owner.Addr, false}},
			wantOwner: owner.ID, wantSlotV: 10,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := maptest.NewState(baseMap(t, 10))
			srv := startServer(t, st, "127.0.0.1:0")
			defer srv.Stop()
			c := newClient(t, nil, srv.Addr())
			store := &fakeStore{answer: tc.answer}

			err := c.Do(context.Background(), key, store.fn)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Do = %v, want %v", err, tc.wantErr)
			}
			if got := store.got(); fmt.Sprint(got) != fmt.Sprint(tc.wantCalls) {
				t.Fatalf("calls = %v\nwant    %v", got, tc.wantCalls)
			}
			m := c.Map()
			if m.OwnerID(s) != tc.wantOwner || m.SlotVersion(s) != tc.wantSlotV || m.Version() != 10 {
				t.Fatalf("map afterwards: owner %q at %d (map %d), want %q at %d", m.OwnerID(s), m.SlotVersion(s), m.Version(), tc.wantOwner, tc.wantSlotV)
			}
			if err != nil && errors.Is(err, ErrTooManyRedirects) && !strings.Contains(err.Error(), "last answer") {
				t.Fatalf("final error does not say what happened: %v", err)
			}
		})
	}
}

func TestMovedTriggersFetchAndNewMapWins(t *testing.T) {
	st := maptest.NewState(baseMap(t, 10))
	srv := startServer(t, st, "127.0.0.1:0")
	defer srv.Stop()
	c := newClient(t, nil, srv.Addr())
	key := []byte("k1")
	s := slots.ForKey(key)
	owner, other := testNodes[s.Int()%3], testNodes[(s.Int()+1)%3]

	// The directory moved the slot, and the watch has already told the
	// client; a store that lags behind answers with an older view. It must
	// neither roll the client back nor loop.
	st.Set(moved(t, st.Map(), 11, s, other.ID))
	eventually(t, "version 11", versionIs(c, 11))
	store := &fakeStore{answer: func(_ int, addr string, _ bool) error {
		if addr == other.Addr {
			return redirect.Redirect{Kind: redirect.Moved, Slot: s, Owner: owner.ID, Addr: owner.Addr, Version: 10}.Err()
		}
		return nil
	}}
	if err := c.Do(context.Background(), key, store.fn); !errors.Is(err, ErrTooManyRedirects) {
		t.Fatalf("Do = %v, want ErrTooManyRedirects", err)
	}
	if got := c.Map().OwnerID(s); got != other.ID {
		t.Fatalf("owner after a stale MOVED = %q, want %q", got, other.ID)
	}
	if got := testutil.ToFloat64(c.m.redirects.WithLabelValues("moved")); got != 5 {
		t.Fatalf("moved redirects = %v, want 5", got)
	}

	// A MOVED newer than the client's map asks for a fresh map. The
	// directory publishes version 12 only after the store answered, so the
	// watch cannot bring it first and make the MOVED old news.
	before := srv.GetMapCalls()
	third := testNodes[(s.Int()+2)%3]
	store = &fakeStore{answer: func(_ int, addr string, _ bool) error {
		if addr != third.Addr {
			return redirect.Redirect{Kind: redirect.Moved, Slot: s, Owner: third.ID, Addr: third.Addr, Version: 12}.Err()
		}
		return nil
	}}
	if err := c.Do(context.Background(), key, store.fn); err != nil {
		t.Fatalf("Do = %v", err)
	}
	eventually(t, "a map fetch", func() bool { return srv.GetMapCalls() > before })
	st.Set(moved(t, st.Map(), 12, s, third.ID))
	eventually(t, "version 12", versionIs(c, 12))
}

func TestDoRespectsDeadline(t *testing.T) {
	st := maptest.NewState(baseMap(t, 10))
	srv := startServer(t, st, "127.0.0.1:0")
	defer srv.Stop()
	// The hint (and the backoff cap) would wait far longer than the deadline.
	c := newClientWith(t, func(o *Options) { o.Endpoints = []string{srv.Addr()}; o.MaxRetryBackoff = time.Hour })
	key := []byte("k")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := c.Do(ctx, key, func(context.Context, string, bool) error {
		return redirect.Fenced{Slot: slots.ForKey(key), Version: 10, RetryAfter: time.Hour}.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do = %v, want context.DeadlineExceeded", err)
	}
}
