package main

import (
	"strings"
	"testing"
)

// TestVersionShowsServer: slotctl version prints its own build and the
// answering slotd's; --client asks no one; an unreachable slotd still gets
// slotctl's version printed, and fails.
func TestVersionShowsServer(t *testing.T) {
	s := startSlotd(t, false)
	var v versionInfo
	decode(t, s.ok(t, "version", "-o", "json"), &v)
	if v.Version == "" || v.Go == "" || v.Server == nil || v.Server.ServerID != "s1" || v.Server.DirectorySchema == 0 {
		t.Fatalf("version -o json = %+v", v)
	}
	table := s.ok(t, "version")
	if !strings.Contains(table, "slotctl") || !strings.Contains(table, "slotd") || !strings.Contains(table, "s1") {
		t.Fatalf("version table:\n%s", table)
	}
	r := (&testSlotd{addr: "127.0.0.1:1"}).run(t, "", "version", "--client", "-o", "json")
	v = versionInfo{}
	decode(t, r.stdout, &v)
	if r.code != exitOK || v.Server != nil {
		t.Fatalf("version --client: exit %d, %+v, stderr %q", r.code, v, r.stderr)
	}
	r = (&testSlotd{addr: "127.0.0.1:1"}).run(t, "", "--timeout", "2s", "version")
	if r.code != exitFailure || !strings.Contains(r.stdout, "slotctl") || !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Fatalf("version against nothing: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	out, _, code := runCLI(t, "--version")
	if code != exitOK || !strings.HasPrefix(out, "slotctl ") {
		t.Fatalf("--version: exit %d, %q", code, out)
	}
}
