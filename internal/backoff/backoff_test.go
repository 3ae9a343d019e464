package backoff

import (
	"context"
	"math"
	"testing"
	"time"
)

func TestCapGrowsAndCaps(t *testing.T) {
	tests := []struct {
		name string
		b    Backoff
		want []time.Duration // Cap(0), Cap(1), ...
	}{
		{"defaults", Backoff{}, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}},
		{"directory watch", Backoff{Initial: 10 * time.Millisecond, Max: 2 * time.Second}, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}},
		{"factor 3", Backoff{Initial: time.Millisecond, Max: time.Second, Factor: 3}, []time.Duration{time.Millisecond, 3 * time.Millisecond, 9 * time.Millisecond, 27 * time.Millisecond}},
		{"initial above max", Backoff{Initial: time.Minute, Max: time.Second}, []time.Duration{time.Second, time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for n, want := range tc.want {
				if got := tc.b.Cap(n); got != want {
					t.Errorf("Cap(%d) = %v, want %v", n, got, want)
				}
			}
		})
	}
}

func TestCapDoesNotOverflow(t *testing.T) {
	b := Backoff{Initial: time.Millisecond, Max: time.Hour}
	for _, n := range []int{60, 1000, math.MaxInt32, math.MaxInt} {
		if got := b.Cap(n); got != time.Hour {
			t.Errorf("Cap(%d) = %v, want the cap", n, got)
		}
	}
	if got := b.Cap(-3); got != time.Millisecond {
		t.Errorf("Cap(-3) = %v, want Initial", got)
	}
}

func TestJitter(t *testing.T) {
	tests := []struct {
		name   string
		jitter float64
		r      float64
		want   time.Duration
	}{
		{"none", 0, 0.99, time.Second},
		{"half, r=0", 0.5, 0, time.Second},
		{"half, r=0.5", 0.5, 0.5, 750 * time.Millisecond},
		{"half, r near 1", 0.5, 0.999999, 500*time.Millisecond + 500*time.Nanosecond},
		{"full, r=0.25", 1, 0.25, 750 * time.Millisecond},
		{"above 1 is full", 7, 0.25, 750 * time.Millisecond},
		{"negative is none", -1, 0.25, time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := Backoff{Initial: time.Second, Max: time.Minute, Jitter: tc.jitter, Rand: func() float64 { return tc.r }}
			if got := b.Delay(0); got != tc.want {
				t.Errorf("Delay(0) = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestJitterBounds draws from the default source: every wait stays within
// [d*(1-Jitter), d].
func TestJitterBounds(t *testing.T) {
	b := Backoff{Initial: 10 * time.Millisecond, Max: time.Second, Jitter: 0.5}
	for n := range 10 {
		hi := b.Cap(n)
		for range 200 {
			if d := b.Delay(n); d < hi/2 || d > hi {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v]", n, d, hi/2, hi)
			}
		}
	}
}

func TestNextAndReset(t *testing.T) {
	b := Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond}
	var got []time.Duration
	for range 4 {
		got = append(got, b.Next())
	}
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Next x4 = %v, want %v", got, want)
		}
	}
	if b.Attempts() != 4 {
		t.Errorf("Attempts = %d, want 4", b.Attempts())
	}
	b.Reset()
	if d := b.Next(); d != time.Millisecond {
		t.Errorf("Next after Reset = %v, want Initial", d)
	}
}

func TestSleepStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := Backoff{Initial: time.Hour, Max: time.Hour}
	if b.Sleep(ctx) {
		t.Error("Sleep on an ended context reported a full wait")
	}
	if SleepContext(ctx, 0) {
		t.Error("SleepContext(0) on an ended context reported true")
	}
	if !SleepContext(context.Background(), 0) {
		t.Error("SleepContext(0) reported false")
	}
	if !(&Backoff{Initial: time.Nanosecond, Max: time.Nanosecond}).Sleep(context.Background()) {
		t.Error("a 1ns Sleep did not complete")
	}
}
