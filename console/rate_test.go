package console

import (
	"testing"
	"time"
)

func TestRateSampler(t *testing.T) {
	r := &rateSampler{window: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	if _, _, ok := r.observe("p1", t0, 0, 0); ok {
		t.Fatal("a rate from one sample")
	}
	if _, _, ok := r.observe("p1", t0.Add(500*time.Millisecond), 5, 500); ok {
		t.Fatal("a rate from half a second")
	}
	m, b, ok := r.observe("p1", t0.Add(2*time.Second), 20, 2000)
	if !ok || m != 10 || b != 1000 {
		t.Fatalf("rate %v %v %v, want 10 moves/s, 1000 B/s", m, b, ok)
	}
	// Past the window, the rate is over the last 10 s only.
	for i := 3; i <= 30; i++ {
		m, _, ok = r.observe("p1", t0.Add(time.Duration(i)*time.Second), uint32(20+(i-2)*2), 2000)
	}
	if !ok || m != 2 {
		t.Fatalf("rate over the window %v, want 2 moves/s", m)
	}
	if len(r.samples) > 12 {
		t.Fatalf("%d samples kept for a 10 s window of 1 s samples", len(r.samples))
	}
	// Another plan starts over.
	if _, _, ok := r.observe("p2", t0.Add(31*time.Second), 0, 0); ok {
		t.Fatal("a rate carried over from another plan")
	}
}
