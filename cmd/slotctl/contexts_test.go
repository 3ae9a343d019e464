package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotd/slotd/internal/devca"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/slots"
)

// bare runs slotctl with exactly args (no --endpoints of a test slotd).
func bare(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	g := &globals{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb,
		tty: func() bool { return false }, poll: 20 * time.Millisecond}
	code := runWith(g, args)
	return result{out.String(), errb.String(), code}
}

func bareOK(t *testing.T, args ...string) string {
	t.Helper()
	r := bare(t, "", args...)
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("slotctl %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// TestContexts: contexts in the config file give endpoints; --context and
// SLOTCTL_CONTEXT pick one, a flag beats the context; the file is 0600
// and one that others may write is refused.
func TestContexts(t *testing.T) {
	s := startSlotd(t, false)
	cfgPath := filepath.Join(t.TempDir(), "slotctl", "config.json")
	t.Setenv("SLOTCTL_CONFIG", cfgPath)

	oneLineErr(t, bare(t, "", "config", "current-context"), exitFailure, "no current context")
	if out := bareOK(t, "config", "set-context", "dev", "--endpoints", "http://"+s.addr); !strings.Contains(out, "context dev created") {
		t.Fatalf("set-context: %q", out)
	}
	bareOK(t, "config", "set-context", "dead", "--endpoints", "127.0.0.1:1")
	bareOK(t, "config", "set-context", "files", "--tls-ca", "ca.pem", "--tls-cert", "c.pem", "--tls-key", "k.pem")
	fi, err := os.Stat(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file mode %v, want 0600", fi.Mode().Perm())
	}
	if got := strings.TrimSpace(bareOK(t, "config", "current-context")); got != "dev" {
		t.Fatalf("current-context = %q, want dev (the first context made)", got)
	}
	var list []contextJSON
	decode(t, bareOK(t, "config", "get-contexts", "-o", "json"), &list)
	if len(list) != 3 || list[0].Name != "dead" || list[1].Name != "dev" || !list[1].Current || !filepath.IsAbs(list[2].TLSCA) || !filepath.IsAbs(list[2].TLSKey) {
		t.Fatalf("get-contexts: %+v", list)
	}

	// The current context (dev) reaches the test slotd with no flag.
	bareOK(t, "init", "--node", "n1=127.0.0.1:7501")
	if out := bareOK(t, "status"); !strings.Contains(out, "n1") {
		t.Fatalf("status through the context: %q", out)
	}
	// --context and SLOTCTL_CONTEXT choose another; a flag beats it.
	oneLineErr(t, bare(t, "", "--context", "dead", "--timeout", "2s", "status"), exitFailure, "127.0.0.1:1")
	t.Setenv("SLOTCTL_CONTEXT", "dead")
	oneLineErr(t, bare(t, "", "--timeout", "2s", "status"), exitFailure, "127.0.0.1:1")
	bareOK(t, "--endpoints", s.addr, "--tls-ca", "", "status")
	bareOK(t, "--context", "dev", "status")
	t.Setenv("SLOTCTL_CONTEXT", "")

	bareOK(t, "config", "use-context", "dead")
	oneLineErr(t, bare(t, "", "config", "use-context", "nope"), exitFailure, `no context "nope"`)
	bareOK(t, "config", "delete-context", "dead")
	bareOK(t, "config", "delete-context", "files")
	oneLineErr(t, bare(t, "", "config", "current-context"), exitFailure, "no current context")
	decode(t, bareOK(t, "config", "get-contexts", "-o", "json"), &list)
	if len(list) != 1 || list[0].Name != "dev" || list[0].Current {
		t.Fatalf("after delete-context: %+v", list)
	}

	if err := os.Chmod(cfgPath, 0o666); err != nil {
		t.Fatal(err)
	}
	oneLineErr(t, bare(t, "", "--context", "dev", "status"), exitFailure, "writable by others")
}

// TestTLSEnvironment: every TLS flag has an environment variable, and an
// https:// endpoint turns TLS on.
func TestTLSEnvironment(t *testing.T) {
	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := startSlotd(t, false, func(c *server.Config) {
		c.TLSCert, c.TLSKey, c.TLSCA, c.TokenFile = set.ServerCert, set.ServerKey, set.CA, set.TokenFile
	})

	t.Setenv("SLOTCTL_TLS_CA", set.CA)
	t.Setenv("SLOTCTL_TOKEN_FILE", set.AdminToken)
	s.ok(t, "init", "--node", "n1=127.0.0.1:7501")
	t.Setenv("SLOTCTL_TOKEN_FILE", "")
	t.Setenv("SLOTCTL_TLS_CERT", set.AdminCert)
	t.Setenv("SLOTCTL_TLS_KEY", set.AdminKey)
	s.ok(t, "nodes", "weight", "n1", "2")
	bareOK(t, "--endpoints", "https://"+s.addr+"/", "status")
	t.Setenv("SLOTCTL_TLS_CERT", "")
	t.Setenv("SLOTCTL_TLS_KEY", "")
	t.Setenv("SLOTCTL_TLS_CA", "")
	// TLS from the URL alone: the dev CA is not a system root, so the
	// handshake fails, which shows TLS was attempted.
	r := bare(t, "", "--endpoints", "https://"+s.addr, "--timeout", "3s", "status")
	if r.code != exitFailure || !strings.Contains(r.stderr, "certificate") {
		t.Fatalf("https:// without a CA: exit %d, %q", r.code, r.stderr)
	}
	oneLineErr(t, bare(t, "", "--endpoints", "http://"+s.addr, "--tls-ca", set.CA, "status"), exitUsage, "write https://")
}

// TestHashStdin: "-" reads keys from stdin, one a line.
func TestHashStdin(t *testing.T) {
	r := bare(t, "user:42\r\n\n{user:42}:cart\nfoo\n", "hash", "first", "-", "-o", "json")
	var got []hashResult
	decode(t, r.stdout, &got)
	want := []string{"first", "user:42", "{user:42}:cart", "foo"}
	if r.code != exitOK || len(got) != len(want) {
		t.Fatalf("exit %d, %+v, %q", r.code, got, r.stderr)
	}
	for i, k := range want {
		if got[i].Key != k || got[i].Slot != slots.ForString(k).Int() {
			t.Errorf("line %d: %+v, want key %q slot %d", i, got[i], k, slots.ForString(k).Int())
		}
	}
}

// TestLookupSlotRanges: --slot takes ranges and lists.
func TestLookupSlotRanges(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	var out []lookupJSON
	decode(t, s.ok(t, "lookup", "--slot", "1-5,7", "--slot", "16383", "-o", "json"), &out)
	var got []uint32
	for _, l := range out {
		if l.Owner == "" || l.Address == "" {
			t.Errorf("slot %d: no owner: %+v", l.Slot, l)
		}
		got = append(got, l.Slot)
	}
	if !slices.Equal(got, []uint32{1, 2, 3, 4, 5, 7, 16383}) {
		t.Fatalf("slots %v", got)
	}
}

// TestMapSummary: one row per node; the counts add up to every slot.
func TestMapSummary(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	var sum mapSummaryJSON
	decode(t, s.ok(t, "map", "--summary", "-o", "json"), &sum)
	total, share := sum.Unassigned, 0.0
	for _, n := range sum.Nodes {
		total += n.Slots
		share += n.SharePct
		if n.Ranges == 0 || n.State != "active" {
			t.Errorf("node %+v", n)
		}
	}
	if len(sum.Nodes) != 3 || total != slots.Count || sum.Unassigned != 0 || share < 99.9 || share > 100.1 {
		t.Fatalf("summary %+v", sum)
	}
	table := s.ok(t, "map", "--summary")
	if !strings.Contains(table, "SHARE") || strings.Count(table, "\n") != 6 {
		t.Fatalf("summary table:\n%s", table)
	}
}

// TestInitDefaultsToRegisteredNodes: init without --node bootstraps over
// the nodes that registered, and refuses when none has.
func TestInitDefaultsToRegisteredNodes(t *testing.T) {
	s := startSlotd(t, false)
	oneLineErr(t, s.run(t, "", "init"), exitRefused, "no active store node has registered")
	s.ok(t, "nodes", "add", "n1=127.0.0.1:7501")
	s.ok(t, "nodes", "add", "n2=127.0.0.1:7502,zone=b")
	out := s.ok(t, "init")
	if !strings.Contains(out, "over the 2 registered nodes") {
		t.Fatalf("init: %q", out)
	}
	var m mapJSON
	decode(t, s.ok(t, "map", "-o", "json"), &m)
	if len(m.Nodes) != 2 || m.Nodes[0].Slots+m.Nodes[1].Slots != slots.Count {
		t.Fatalf("map after init: %+v", m.Nodes)
	}
}

// watchLines runs slotctl watch with args until it printed count lines,
// changing the map with change until it did.
func watchLines(t *testing.T, s *testSlotd, count int, change func(i int), args ...string) []string {
	t.Helper()
	var wg sync.WaitGroup
	var r result
	wg.Add(1)
	go func() {
		defer wg.Done()
		r = s.run(t, "", append([]string{"watch", "--count", strconv.Itoa(count)}, args...)...)
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for i := 0; ; i++ {
		select {
		case <-done:
		case <-time.After(50 * time.Millisecond):
			change(i)
			continue
		}
		break
	}
	if r.code != exitOK {
		t.Fatalf("watch: exit %d, %s", r.code, r.stderr)
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// TestWatchFilters: --node keeps one node's changes and skips the others'.
func TestWatchFilters(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	s.ok(t, "nodes", "add", "n4=127.0.0.1:7504")
	// n4's weight changes are the only changes of n4; n2's are skipped.
	lines := watchLines(t, s, 3, func(i int) {
		s.ok(t, "nodes", "weight", "n2", strconv.Itoa(i%5+1))
		if i%2 == 1 {
			s.ok(t, "nodes", "weight", "n4", strconv.Itoa(i%5+1))
		}
	}, "-o", "json", "--node", "n4")
	if len(lines) != 3 {
		t.Fatalf("lines %q", lines)
	}
	for i, l := range lines[1:] {
		var ev watchJSON
		decode(t, l, &ev)
		if len(ev.Nodes) != 1 || ev.Nodes[0].ID != "n4" || len(ev.Slots) != 0 {
			t.Errorf("event %d: %+v, want only n4", i+1, ev)
		}
	}
	// --slot: a slot that no change touches prints the first map only,
	// so --count 1 returns at once.
	if lines := watchLines(t, s, 1, func(int) {}, "--slot", "0-3"); len(lines) != 1 || !strings.Contains(lines[0], "full map") {
		t.Fatalf("--slot lines %q", lines)
	}
	oneLineErr(t, s.run(t, "", "watch", "--slot", "9-2"), exitUsage, "reversed")
}

// TestWatchTimestamps: each line starts with the time it arrived; JSON
// has it as "time"; --timestamps=false leaves the table's out.
func TestWatchTimestamps(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	before := time.Now().UTC().Add(-time.Second)
	lines := watchLines(t, s, 1, func(int) {})
	f := strings.Fields(lines[0])
	ts, err := time.Parse(time.RFC3339Nano, f[0])
	if err != nil || ts.Before(before) || f[1] != "version" {
		t.Fatalf("line %q: %v", lines[0], err)
	}
	var ev watchJSON
	decode(t, watchLines(t, s, 1, func(int) {}, "-o", "json")[0], &ev)
	if _, err := time.Parse(time.RFC3339Nano, ev.Time); err != nil {
		t.Fatalf("json time %q: %v", ev.Time, err)
	}
	if l := watchLines(t, s, 1, func(int) {}, "--timestamps=false"); !strings.HasPrefix(l[0], "version ") {
		t.Fatalf("--timestamps=false: %q", l[0])
	}
}

// TestCompletion: node ids, plan ids, -o values and contexts complete.
func TestCompletion(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	s.ok(t, "plan", "--drain", "n3")
	t.Setenv("SLOTCTL_CONFIG", filepath.Join(t.TempDir(), "config.json"))
	bareOK(t, "config", "set-context", "prod", "--endpoints", s.addr)
	complete := func(args ...string) []string {
		t.Helper()
		r := s.run(t, "", append([]string{"__complete"}, args...)...)
		if r.code != exitOK {
			t.Fatalf("__complete %q: exit %d, %s", args, r.code, r.stderr)
		}
		out := r.stdout
		var items []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(l, ":") && !strings.HasPrefix(l, "Completion ended") {
				items = append(items, strings.SplitN(l, "\t", 2)[0])
			}
		}
		return items
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"nodes", "drain", ""}, []string{"n1", "n2", "n3"}},
		{[]string{"map", "--node", ""}, []string{"n1", "n2", "n3"}},
		{[]string{"-o", ""}, []string{"table", "json"}},
		{[]string{"--context", ""}, []string{"prod"}},
		{[]string{"config", "use-context", ""}, []string{"prod"}},
	} {
		if got := complete(tc.args...); !slices.Equal(got, tc.want) {
			t.Errorf("complete %q = %q, want %q", tc.args, got, tc.want)
		}
	}
	ids := complete("cancel", "")
	if len(ids) != 1 || !strings.HasPrefix(ids[0], "p-") {
		t.Errorf("plan ids %q", ids)
	}
}
