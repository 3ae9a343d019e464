package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/load"
)

// TestStatusOrphanBytes: nodes with left copies get a status line and an
// orphan_bytes object in -o json; with none, neither appears.
func TestStatusOrphanBytes(t *testing.T) {
	st := &slotdv1.StatusResponse{Version: 7, Server: "s1"}
	out, g := capture("table")
	if err := g.printStatus(st, map[string]int64{"n3": 40 << 10, "n2": 3 << 20}, load.View{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "left copies to clean up (reconciliation drops them): n2 3.0 MiB, n3 40.0 KiB") {
		t.Fatalf("status:\n%s", out)
	}
	out, g = capture("json")
	if err := g.printStatus(st, map[string]int64{"n3": 10}, load.View{}); err != nil {
		t.Fatal(err)
	}
	var got statusJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.OrphanBytes["n3"] != 10 {
		t.Fatalf("json %s: %v", out, err)
	}
	out, g = capture("json")
	if err := g.printStatus(st, nil, load.View{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "orphan") {
		t.Fatalf("orphan_bytes without orphans: %s", out)
	}
	out, g = capture("table")
	if err := g.printStatus(st, nil, load.View{}); err != nil || strings.Contains(out.String(), "left copies") {
		t.Fatalf("status without orphans: %s %v", out, err)
	}
}
