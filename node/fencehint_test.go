package node

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/slotd/slotd/slots"
)

// TestFenceRetryHint: a fenced answer suggests waiting as long as the
// fence has been up, at least 1ms and at most Config.FenceRetryAfter, so a
// writer that meets a move's short fence asks again within about its
// length, and one held by a long fence backs off.
func TestFenceRetryHint(t *testing.T) {
	clock := &simClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	n, err := New(Config{ID: "a", Store: newMemStore(), Map: m, StateDir: t.TempDir(), Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	key := "{hint}:1"
	if _, err := n.Fence(ctx, slots.ForString(key), "mv", 9); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		age, want time.Duration
	}{
		{0, time.Millisecond},
		{300 * time.Microsecond, time.Millisecond},
		{4 * time.Millisecond, 4 * time.Millisecond},
		{20 * time.Millisecond, 20 * time.Millisecond},
		{time.Second, 50 * time.Millisecond},
	} {
		clock.now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(tc.age)
		var fe *FencedError
		if err := n.Write(ctx, []byte(key), put(key, "v")); !errors.As(err, &fe) || fe.RetryAfter != tc.want {
			t.Fatalf("a write %v into the fence: %v, want a FencedError suggesting %v", tc.age, err, tc.want)
		}
	}
}
