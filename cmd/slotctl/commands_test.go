package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// oneLineErr fails the test unless r exited with code and printed exactly
// one "slotctl: ..." line on stderr containing want, free of gRPC framing.
func oneLineErr(t *testing.T, r result, code int, want string) {
	t.Helper()
	if r.code != code || !strings.HasPrefix(r.stderr, "slotctl: ") || strings.Count(r.stderr, "\n") != 1 ||
		!strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "rpc error") || strings.Contains(r.stderr, "desc =") {
		t.Fatalf("exit %d, stderr %q; want exit %d and one line containing %q", r.code, r.stderr, code, want)
	}
}

// TestUsageErrorsSendNothing: bad command lines exit 2 before dialing; the
// endpoint is a closed port, so any call would exit 1 instead.
func TestUsageErrorsSendNothing(t *testing.T) {
	s := &testSlotd{addr: "127.0.0.1:1"}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"id": "p-1", "moves": [{"slot": "x"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"init bad spec", []string{"init", "--node", "n1"}, `node "n1": want ID=HOST:PORT`},
		{"init bad address", []string{"init", "--node", "n1=localhost"}, "is not host:port"},
		{"init id with colon", []string{"init", "--node", "a:b=127.0.0.1:1"}, "must not contain ':'"},
		{"init weight zero", []string{"init", "--node", "n1=127.0.0.1:1,weight=0"}, "weight of at least 1"},
		{"init unknown option", []string{"init", "--node", "n1=127.0.0.1:1,rack=3"}, `unknown option "rack"`},
		{"init twice the same node", []string{"init", "--node", "n1=127.0.0.1:1", "--node", "n1=127.0.0.1:2"}, "given twice"},
		{"plan bad weight", []string{"plan", "--weight", "n1=x"}, `weight "x" is not a whole number`},
		{"plan node twice", []string{"plan", "--drain", "n1", "--weight", "n1=2"}, "node n1 is given twice"},
		{"move slot out of range", []string{"move", "16384", "--to", "n1"}, "from 0 to 16383"},
		{"move without target", []string{"move", "5"}, "--to NODE_ID"},
		{"throttle bits", []string{"throttle", "50Mb/s"}, "looks like bits"},
		{"throttle junk", []string{"throttle", "fast"}, "has no number"},
		{"lookup nothing", []string{"lookup"}, "at least one KEY"},
		{"lookup bad slot", []string{"lookup", "--slot", "16384"}, "out of range"},
		{"lookup bad slot range", []string{"lookup", "--slot", "5-1"}, "reversed"},
		{"lookup too many slots", []string{"lookup", "--slot", "0-2000"}, "more than 1024"},
		{"endpoint with a path", []string{"--endpoints", "https://h:1/x", "status"}, "no path"},
		{"endpoint of another scheme", []string{"--endpoints", "grpc://h:1", "status"}, "only http"},
		{"mixed schemes", []string{"--endpoints", "http://a:1,https://b:1", "status"}, "mixes"},
		{"unknown context", []string{"--context", "nope", "status"}, "no context"},
		{"apply missing file", []string{"apply", "missing.json"}, "read plan file"},
		{"apply bad file", []string{"apply", bad}, "is not a plan file"},
		{"rollback nothing", []string{"rollback"}, "PLAN_ID or --last"},
		{"history limit", []string{"history", "--limit", "0"}, "at least 1"},
		{"token without tls", []string{"status", "--token-file", "x"}, "needs TLS"},
		{"cert without key", []string{"status", "--tls-cert", "x"}, "go together"},
		{"rebalance json asks", []string{"rebalance", "-o", "json"}, "pass --yes"},
		{"nodes without verb", []string{"nodes"}, "list|add|set-addr|drain|undrain|remove|weight"},
		{"nodes weight args", []string{"nodes", "weight", "n1"}, "accepts 2 arg"},
		{"timeout zero", []string{"status", "--timeout", "0s"}, "--timeout must be positive"},
		{"bad endpoint", []string{"status", "--endpoints", "nohostport"}, "not host:port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oneLineErr(t, s.run(t, "", tc.args...), exitUsage, tc.want)
		})
	}
}

func TestUnreachable(t *testing.T) {
	s := &testSlotd{addr: "127.0.0.1:1"}
	oneLineErr(t, s.run(t, "", "status"), exitFailure, "cannot reach slotd at 127.0.0.1:1")
}

func TestParseRate(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		err  string
	}{
		{"50MiB/s", 50 << 20, ""},
		{"50MiB", 50 << 20, ""},
		{"1.5 GB/s", 1_500_000_000, ""},
		{"512KiB/s", 512 << 10, ""},
		{"10KB/s", 10_000, ""},
		{"2GiB/s", 2 << 30, ""},
		{"100B/s", 100, ""},
		{"1048576", 1 << 20, ""},
		{"0", 0, ""},
		{"unlimited", 0, ""},
		{" 7MB/s ", 7_000_000, ""},
		{"", 0, "has no number"},
		{"/s", 0, "has no number"},
		{"MiB/s", 0, "has no number"},
		{"50mib/s", 0, `unknown unit "mib"`},
		{"50Mb/s", 0, "looks like bits"},
		{"50Mbps", 0, "looks like bits"},
		{"50TiB/s", 0, `unknown unit "TiB"`},
		{"-5MB/s", 0, "has no number"},
		{"1.2.3MB", 0, "is not a number"},
		{"0.5B/s", 0, "less than 1 byte/s"},
		{"99999999999GiB/s", 0, "too large"},
		{"50MiB/m", 0, "unknown unit"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseRate(tc.in)
			switch {
			case tc.err == "" && (err != nil || got != tc.want):
				t.Fatalf("parseRate(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || exitCode(err) != exitUsage):
				t.Fatalf("parseRate(%q) = %d, %v; want a usage error containing %q", tc.in, got, err, tc.err)
			}
		})
	}
}

func TestFormatBytes(t *testing.T) {
	cases := map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 50 << 20: "50.0 MiB", 3 << 40: "3.0 TiB"}
	for in, want := range cases {
		if got := formatBytes(in); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestClusterCommands drives a slotd without a mover: bootstrap, node
// changes, refusals, plan states, the wait's exits, watch and migrate.
func TestClusterCommands(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)

	t.Run("init twice is refused", func(t *testing.T) {
		oneLineErr(t, s.run(t, "", "init", "--node", "n1=127.0.0.1:7501"), exitRefused, "already bootstrapped")
	})
	t.Run("nodes add and drain", func(t *testing.T) {
		if out := s.ok(t, "nodes", "add", "n4=127.0.0.1:7504"); !strings.Contains(out, "registered node n4 (127.0.0.1:7504, weight 1, active)") {
			t.Fatalf("nodes add: %q", out)
		}
		var ch nodeChangeJSON
		decode(t, s.ok(t, "nodes", "drain", "n3", "-o", "json"), &ch)
		if ch.Node.ID != "n3" || ch.Node.State != "draining" || ch.Version == 0 {
			t.Fatalf("nodes drain: %+v", ch)
		}
		s.settle(t)
		var list nodesListJSON
		decode(t, s.ok(t, "nodes", "list", "-o", "json"), &list)
		if len(list.Nodes) != 4 || list.Nodes[2].State != "draining" || list.Nodes[3].Slots != 0 {
			t.Fatalf("nodes list: %+v", list)
		}
		// A drain taken back: active again, at a newer version.
		var drained, undrained nodeChangeJSON
		decode(t, s.ok(t, "nodes", "drain", "n4", "-o", "json"), &drained)
		decode(t, s.ok(t, "nodes", "undrain", "n4", "-o", "json"), &undrained)
		if drained.Node.State != "draining" || undrained.Node.State != "active" || undrained.Version <= drained.Version {
			t.Fatalf("nodes drain then undrain n4: %+v, %+v", drained, undrained)
		}
		if out := s.ok(t, "nodes", "undrain", "n4"); !strings.Contains(out, "undrained node n4 (127.0.0.1:7504, weight 1, active)") {
			t.Fatalf("nodes undrain of an active node: %q", out)
		}
		s.settle(t)
	})
	t.Run("server errors", func(t *testing.T) {
		oneLineErr(t, s.run(t, "", "nodes", "drain", "nx"), exitFailure, `node "nx" is not registered`)
		oneLineErr(t, s.run(t, "", "nodes", "undrain", "nx"), exitFailure, `node "nx" is not registered`)
		oneLineErr(t, s.run(t, "", "nodes", "remove", "n1"), exitRefused, "still owns")
		oneLineErr(t, s.run(t, "", "map", "--node", "nx"), exitFailure, `node "nx" is not in the map`)
		oneLineErr(t, s.run(t, "", "pause"), exitRefused, "no plan is applying or paused")
		oneLineErr(t, s.run(t, "", "rollback", "--last"), exitRefused, "no plan has ended")
	})
	t.Run("map covers every slot", func(t *testing.T) {
		var m mapJSON
		decode(t, s.ok(t, "map", "-o", "json"), &m)
		total := 0
		for _, n := range m.Nodes {
			total += n.Slots
		}
		if total != 16384 || len(m.Nodes) != 4 {
			t.Fatalf("map: %d nodes, %d slots", len(m.Nodes), total)
		}
	})
	t.Run("rebalance declined changes nothing", func(t *testing.T) {
		r := s.runTerminal(t, "n\n", "rebalance", "--max-moves", "3")
		oneLineErr(t, r, exitFailure, "not applied; nothing changed")
		if !strings.Contains(r.stdout, "3 moves") {
			t.Fatalf("rebalance showed no plan: %q", r.stdout)
		}
		var st statusJSON
		decode(t, s.ok(t, "status", "-o", "json"), &st)
		if st.ActivePlan.Plan != nil {
			t.Fatalf("a declined rebalance left an active plan: %s", st.ActivePlan.GetId())
		}
	})
	t.Run("wait: interrupted, then cancelled by someone else", func(t *testing.T) {
		var p struct{ ID string }
		decode(t, s.ok(t, "plan", "--max-moves", "2", "-o", "json"), &p)
		s.ok(t, "apply", p.ID) // no mover: it stays applying
		oneLineErr(t, s.run(t, "", "apply", p.ID), exitRefused, "only a proposed plan can be applied")

		var out bytes.Buffer
		g := &globals{endpoints: s.addr, timeout: 5 * time.Second, output: "table", stdout: &out,
			tty: func() bool { return false }, poll: 10 * time.Millisecond}
		c, err := g.dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Ctrl-C cancels the command's context: here once the first
		// progress line is out (a timer raced the first poll under load).
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, err = g.waitPlan(ctx, c, p.ID, writerFunc(func(b []byte) (int, error) { defer cancel(); return out.Write(b) }))
		if err == nil || exitCode(err) != exitFailure || !strings.Contains(err.Error(), "still running; stop it with: slotctl cancel "+p.ID) {
			t.Fatalf("interrupted wait: %v", err)
		}
		if !strings.Contains(out.String(), "0/2 slots") {
			t.Fatalf("no progress line: %q", out.String())
		}

		if out := s.ok(t, "cancel"); !strings.Contains(out, "plan "+p.ID+" cancelled") {
			t.Fatalf("cancel: %q", out)
		}
		r := s.run(t, "", "apply", p.ID, "--wait")
		oneLineErr(t, r, exitRefused, "only a proposed plan")
		_, err = g.waitPlan(context.Background(), c, p.ID, nil)
		if exitCode(err) != exitRefused || !strings.Contains(err.Error(), "was cancelled") {
			t.Fatalf("wait on a cancelled plan: %v", err)
		}
	})
	t.Run("migrate", func(t *testing.T) {
		var m migrateJSON
		decode(t, s.ok(t, "migrate", "-o", "json"), &m)
		if m.Health != "serving" || m.Version == 0 {
			t.Fatalf("migrate: %+v", m)
		}
	})
	t.Run("watch", func(t *testing.T) {
		var wg sync.WaitGroup
		var r result
		wg.Add(1)
		go func() { defer wg.Done(); r = s.run(t, "", "watch", "-o", "json", "--count", "2") }()
		// Change the map until the watch has seen a change after its first map.
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for w := 2; ; w++ {
			select {
			case <-done:
			case <-time.After(50 * time.Millisecond):
				s.ok(t, "nodes", "weight", "n4", strings.Repeat("1", w%5+1))
				continue
			}
			break
		}
		if r.code != exitOK {
			t.Fatalf("watch: exit %d, %s", r.code, r.stderr)
		}
		sc := bufio.NewScanner(strings.NewReader(r.stdout))
		var evs []watchJSON
		for sc.Scan() {
			var ev watchJSON
			decode(t, sc.Text(), &ev)
			evs = append(evs, ev)
		}
		if len(evs) != 2 || !evs[0].Full || len(evs[0].Nodes) != 4 || evs[1].Full || evs[1].FromVersion != evs[0].Version ||
			len(evs[1].Nodes) != 1 || evs[1].Nodes[0].ID != "n4" {
			t.Fatalf("watch events: %+v", evs)
		}
	})
	t.Run("a dead endpoint first", func(t *testing.T) {
		s.ok(t, "--endpoints", "127.0.0.1:1,"+s.addr, "status")
	})
	t.Run("SLOTCTL_ENDPOINTS", func(t *testing.T) {
		t.Setenv("SLOTCTL_ENDPOINTS", s.addr)
		var out, errb bytes.Buffer
		g := &globals{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, tty: func() bool { return false }, poll: time.Second}
		if code := runWith(g, []string{"status"}); code != exitOK || !strings.Contains(out.String(), "server s1") {
			t.Fatalf("status from the environment's endpoint: exit %d, %q %q", code, out.String(), errb.String())
		}
	})
	t.Run("completion", func(t *testing.T) {
		if out := s.ok(t, "completion", "bash"); !strings.Contains(out, "bash completion") {
			t.Fatalf("completion bash: %.100q", out)
		}
	})
}

func decode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %.200q: %v", s, err)
	}
}

// writerFunc is an io.Writer from a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
