package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/server/servertest"
	"github.com/slotd/slotd/slotkv"
)

// testSlotd is slotd in-process (server/servertest: the server package
// over a real embedded etcd, gRPC on 127.0.0.1), stopped when the test ends.
type testSlotd struct {
	addr string
	srv  *servertest.Slotd
}

// startSlotd serves slotd. With mover, an executor runs plans (it needs
// store nodes that answer: see startKV); without, plans stay where the
// API leaves them, which keeps output deterministic. edits change the
// server's configuration (TLS, tokens).
func startSlotd(t *testing.T, withMover bool, edits ...func(*server.Config)) *testSlotd {
	t.Helper()
	s := servertest.Start(t, append([]func(*server.Config){func(c *server.Config) {
		c.DisableMover = !withMover
		c.TuneMover = func(ec *mover.ExecutorConfig) {
			ec.Backoff, ec.DisableLiveness = 20*time.Millisecond, true
		}
	}}, edits...)...)
	return &testSlotd{addr: s.Addr(), srv: s}
}

// result is one slotctl run.
type result struct {
	stdout, stderr string
	code           int
}

// run runs slotctl against s as operator "tester", with fast polling.
func (s *testSlotd) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	g := &globals{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb,
		tty: func() bool { return false }, poll: 20 * time.Millisecond}
	code := runWith(g, append([]string{"--endpoints", s.addr, "--operator", "tester"}, args...))
	return result{out.String(), errb.String(), code}
}

// ok runs slotctl and fails the test unless it exits 0 with no stderr.
func (s *testSlotd) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := s.run(t, "", args...)
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("slotctl %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// demo bootstraps the demo cluster's n1-n3 with a small ring (few ranges).
func (s *testSlotd) demo(t *testing.T) {
	t.Helper()
	s.ok(t, "init", "--node", "n1=127.0.0.1:7501", "--node", "n2=127.0.0.1:7502,zone=b",
		"--node", "n3=127.0.0.1:7503,weight=2", "--vnodes", "8")
}

// times matches the timestamps slotctl prints, which golden files elide.
var times = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

// elideTimes replaces timestamps; a table's (to the second) keeps its width
// so columns stay aligned.
func elideTimes(s string) string {
	return times.ReplaceAllStringFunc(s, func(m string) string {
		if len(m) == len("2006-01-02T15:04:05Z") {
			return "YYYY-MM-DDTHH:MM:SSZ"
		}
		return "TIME"
	})
}

// eventually polls cond until it holds, failing the test after 30s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, 30*time.Second, what, cond)
}

// startKV serves a slotkv store node that follows slotd's map on a free
// port and returns its address; it stops when the test ends.
func startKV(t *testing.T, id, slotdAddr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Options{Endpoints: []string{slotdAddr},
		ReconnectBackoff: 10 * time.Millisecond, MaxReconnectBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := slotkv.Open(slotkv.Config{ID: id, DataDir: t.TempDir(), Map: node.ClientMap{C: c}, NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = g.Serve(lis) }()
	go func() {
		defer wg.Done()
		if err := srv.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("slotkv %s: %v", id, err)
		}
	}()
	t.Cleanup(func() {
		g.Stop()
		stop()
		wg.Wait()
		srv.Close()
		c.Close()
	})
	return lis.Addr().String()
}

// settle waits until the map slotd serves (from its watch-fed hub) has
// caught up with the directory (which Status reads): reads of the map do
// not wait for a change just acknowledged.
func (s *testSlotd) settle(t *testing.T) {
	t.Helper()
	var st statusJSON
	decode(t, s.ok(t, "status", "-o", "json"), &st)
	eventually(t, "the served map at the directory's version", func() bool {
		var l nodesListJSON
		decode(t, s.ok(t, "nodes", "list", "-o", "json"), &l)
		return l.Version >= st.Version
	})
}
