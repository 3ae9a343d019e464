package manualclock

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	start := time.Unix(1000, 0)
	c := New(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", c.Now(), start)
	}
	c.Advance(time.Minute)
	if want := start.Add(time.Minute); !c.Now().Equal(want) {
		t.Fatalf("after Advance: %v, want %v", c.Now(), want)
	}
	if c.After(time.Nanosecond) != nil {
		t.Fatal("After fires")
	}
}
