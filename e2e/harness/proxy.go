package harness

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 between a process and one of the
// addresses it dials, for network faults: Cut closes every connection it
// forwards and refuses new ones (each is accepted and closed at once), as
// if the path between the two were gone; Heal forwards again. It keeps its
// port while cut, so nothing else can take it. It stops with the test.
type Proxy struct {
	Name   string
	addr   string
	target string
	l      net.Listener
	wg     sync.WaitGroup // the accept loop and every copy

	mu      sync.Mutex // guards the fields below
	cut     bool
	closed  bool
	open    map[net.Conn]struct{} // both ends of every forwarded connection
	refused int                   // connections closed at once while cut
	served  int                   // connections forwarded
}

// Proxy starts a proxy named name on h.Addr(name) that forwards every
// connection to target (host:port on 127.0.0.1).
func (h *Harness) Proxy(name, target string) *Proxy {
	h.t.Helper()
	addr := h.Addr(name)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		h.t.Fatalf("harness: proxy %s on %s: %v", name, addr, err)
	}
	p := &Proxy{Name: name, addr: addr, target: target, l: l, open: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	h.t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address: what the process dials instead of the target.
func (p *Proxy) Addr() string { return p.addr }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Cut closes every forwarded connection, both ends, and refuses new ones
// until Heal. When it returns, no byte passes any more.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.open {
		c.Close()
		delete(p.open, c)
	}
}

// Heal forwards new connections again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Stats returns how many connections the proxy forwarded and how many it
// refused while cut.
func (p *Proxy) Stats() (served, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served, p.refused
}

// close stops the proxy: the listener, every connection, every goroutine.
func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.open {
		c.Close()
		delete(p.open, c)
	}
	p.mu.Unlock()
	p.l.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a connection reset before it was accepted
		}
		p.mu.Lock()
		stop := p.cut || p.closed
		if stop {
			p.refused++
		}
		p.mu.Unlock()
		if stop {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// forward dials the target for client c and copies both ways until either
// side ends or Cut closes them.
func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	t, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close() // as the target would: nothing listens
		return
	}
	// Cut may have come while this dialled: then the pair never forwards.
	p.mu.Lock()
	if p.cut || p.closed {
		p.refused++
		p.mu.Unlock()
		c.Close()
		t.Close()
		return
	}
	p.served++
	p.open[c], p.open[t] = struct{}{}, struct{}{}
	p.mu.Unlock()

	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if err == nil {
			// src sent FIN: pass it on, keep the other way open.
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
		} else {
			// A reset or a Cut: the whole connection is gone.
			c.Close()
			t.Close()
		}
		done <- struct{}{}
	}
	go pipe(t, c)
	pipe(c, t)
	<-done
	c.Close()
	t.Close()
	p.mu.Lock()
	delete(p.open, c)
	delete(p.open, t)
	p.mu.Unlock()
}
