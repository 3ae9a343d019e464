package main

import (
	"strings"
	"testing"
)

// TestGuardedNodeEdits: nodes add refuses to re-point a node, by id or by
// address, saying what each node owns (exit 3, nothing changes); an address
// change is nodes set-addr, audited. On the old code `nodes add n1=<n2's
// address>` exited 0 ("it owns no slots yet") and re-pointed n1.
func TestGuardedNodeEdits(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t) // n1 .7501, n2 .7502, n3 .7503
	list := func() string {
		t.Helper()
		s.settle(t)
		return s.ok(t, "nodes", "list", "-o", "json")
	}
	before := list()
	oneLineErr(t, s.run(t, "", "nodes", "add", "n1=127.0.0.1:7502"), exitRefused,
		"node n1 is registered at 127.0.0.1:7501 and owns 4096 slots; change its address with: slotctl nodes set-addr n1 127.0.0.1:7502; address 127.0.0.1:7502 is node n2's, which owns 4096 slots; nothing changed")
	oneLineErr(t, s.run(t, "", "nodes", "add", "n1=127.0.0.1:7601"), exitRefused, "node n1 is registered at 127.0.0.1:7501 and owns 4096 slots")
	oneLineErr(t, s.run(t, "", "nodes", "add", "n9=127.0.0.1:7503"), exitRefused, "address 127.0.0.1:7503 is node n3's, which owns 8192 slots")
	if after := list(); after != before {
		t.Fatalf("refused adds changed the nodes:\n%s\nwas\n%s", after, before)
	}
	if out := s.ok(t, "nodes", "add", "n3=127.0.0.1:7503,weight=2"); !strings.Contains(out, "already registered") || !strings.Contains(out, "nothing changed") {
		t.Fatalf("adding n3 as it is: %q", out)
	}
	if out := s.ok(t, "nodes", "add", "n4=127.0.0.1:7504"); !strings.Contains(out, "registered node n4") {
		t.Fatalf("nodes add n4: %q", out)
	}

	var ch nodeChangeJSON
	decode(t, s.ok(t, "nodes", "set-addr", "n4", "127.0.0.1:7604", "--reason", "new host", "-o", "json"), &ch)
	if ch.Node.Address != "127.0.0.1:7604" {
		t.Fatalf("set-addr: %+v", ch)
	}
	got, entries := logOf(t, s, "--kind", "node", "--node", "n4")
	if len(got) != 2 || got[0] != "node:node-addr" || got[1] != "node:node-add" || entries[0].Reason != "new host" ||
		entries[0].Operator != "tester" || !strings.Contains(entries[0].Detail, "127.0.0.1:7504 -> 127.0.0.1:7604") {
		t.Fatalf("node log of n4 = %v %+v", got, entries)
	}
	oneLineErr(t, s.run(t, "", "nodes", "set-addr", "n4", "nohost"), exitUsage, "is not host:port")
	oneLineErr(t, s.run(t, "", "nodes", "set-addr", "nx", "127.0.0.1:1"), exitFailure, `node "nx" is not registered`)
}
