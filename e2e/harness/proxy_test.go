package harness

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// echoServer answers every connection with what it receives, until stop.
func echoServer(t *testing.T) (addr string, stop func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	return l.Addr().String(), func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
}

// roundTrip sends msg on c and reads it back.
func roundTrip(t *testing.T, c net.Conn, msg string) error {
	t.Helper()
	// A bound against a hang, not a wait for anything.
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		t.Fatalf("read %q back, sent %q", buf, msg)
	}
	return nil
}

// closedByPeer reports whether c's peer closed it (a read ends in EOF or a
// reset rather than the safety deadline).
func closedByPeer(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil {
		return errors.New("read a byte")
	}
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("still open after 10s")
	}
	return nil
}

func TestProxyCutAndHeal(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	target, stopEcho := echoServer(t)
	defer stopEcho()
	h := &Harness{t: t, root: t.TempDir(), addrs: map[string]string{}}
	p := h.Proxy("echo", target)
	if p.Addr() == target || p.Target() != target {
		t.Fatalf("proxy at %s to %s", p.Addr(), p.Target())
	}

	open, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := roundTrip(t, open, "before the cut"); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	p.Cut()
	if err := closedByPeer(open); err != nil {
		t.Fatalf("a connection open at the cut: %v", err)
	}
	refused, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("the proxy must keep its port while cut: %v", err)
	}
	if err := closedByPeer(refused); err != nil {
		t.Fatalf("a connection made while cut: %v", err)
	}
	refused.Close()

	p.Heal()
	again, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(t, again, "after the heal"); err != nil {
		t.Fatalf("through the healed proxy: %v", err)
	}
	// The target ending the connection ends it for the client too.
	stopEcho()
	if err := closedByPeer(again); err != nil {
		t.Fatalf("after the target closed: %v", err)
	}
	again.Close()

	if served, refusedN := p.Stats(); served != 2 || refusedN != 1 {
		t.Errorf("stats: %d forwarded, %d refused; want 2 and 1", served, refusedN)
	}
	p.close() // as at the test's end; the goroutine check above needs it now
}
