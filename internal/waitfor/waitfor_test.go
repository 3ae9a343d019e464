package waitfor

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatalTB records a Fatalf and stops the caller the way testing does
// (here with a panic the test recovers).
type fatalTB struct {
	testing.TB
	msg string
}

type fatal struct{}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(fatal{})
}

func failed(f func()) (stopped bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(fatal); !ok {
				panic(r)
			}
			stopped = true
		}
	}()
	f()
	return false
}

func TestErrPollsUntilNil(t *testing.T) {
	n := 0
	Err(t, time.Minute, "three calls", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("cond ran %d times, want 3", n)
	}
	m := 0
	True(t, time.Minute, "two calls", func() bool { m++; return m == 2 })
	if m != 2 {
		t.Fatalf("cond ran %d times, want 2", m)
	}
}

func TestTimeoutFailsWithTheLastError(t *testing.T) {
	f := &fatalTB{TB: t}
	if !failed(func() {
		ErrEvery(f, 0, time.Millisecond, "the thing", func() error { return errors.New("still broken") })
	}) {
		t.Fatal("ErrEvery did not fail after its bound")
	}
	if !strings.Contains(f.msg, "the thing") || !strings.Contains(f.msg, "still broken") {
		t.Errorf("message %q lacks what and the last error", f.msg)
	}
	if !failed(func() { True(f, 0, "the other thing", func() bool { return false }) }) || !strings.Contains(f.msg, "the other thing") {
		t.Errorf("True did not fail naming what: %q", f.msg)
	}
}
