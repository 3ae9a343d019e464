// Package syncbuf is a bytes.Buffer safe for concurrent use: a logger, a
// process's stdout and stderr, or a command under test write to it while the
// test reads what was written so far.
//
// Usage:
//
//	var out syncbuf.Buffer
//	go run(ctx, args, &out)
//	waitfor.True(t, 20*time.Second, "serving", func() bool { return strings.Contains(out.String(), "serving") })
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer guarded by a mutex. The zero value is empty and
// ready; it must not be copied after first use.
type Buffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
