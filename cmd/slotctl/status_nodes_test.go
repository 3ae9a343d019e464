package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/load"
)

// info is a ListNodes entry: orphan bytes when b > 0, a live lease when
// leased.
func info(id string, b int64, leased bool) *slotdv1.NodeInfo {
	n := &slotdv1.NodeInfo{Node: &slotdv1.Node{Id: id}}
	if b > 0 {
		n.OrphanBytes = &b
	}
	if leased {
		n.LeaseExpires = timestamppb.New(time.Date(2026, 1, 2, 3, 4, 14, 0, time.UTC))
	}
	return n
}

// TestStatusOrphanBytes: nodes with left copies get a status line and an
// orphan_bytes object in -o json; with none, neither appears.
func TestStatusOrphanBytes(t *testing.T) {
	st := &slotdv1.StatusResponse{Version: 7, Server: "s1"}
	out, g := capture("table")
	if err := g.printStatus(st, []*slotdv1.NodeInfo{info("n3", 40<<10, true), info("n2", 3<<20, true)}, load.View{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "left copies to clean up (reconciliation drops them): n2 3.0 MiB, n3 40.0 KiB") {
		t.Fatalf("status:\n%s", out)
	}
	out, g = capture("json")
	if err := g.printStatus(st, []*slotdv1.NodeInfo{info("n3", 10, true)}, load.View{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	var got statusJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.OrphanBytes["n3"] != 10 {
		t.Fatalf("json %s: %v", out, err)
	}
	out, g = capture("json")
	if err := g.printStatus(st, nil, load.View{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "orphan") {
		t.Fatalf("orphan_bytes without orphans: %s", out)
	}
	out, g = capture("table")
	if err := g.printStatus(st, nil, load.View{}, nil, nil); err != nil || strings.Contains(out.String(), "left copies") {
		t.Fatalf("status without orphans: %s %v", out, err)
	}
}

// TestStatusSelfFenced: nodes without a live lease are named in a status
// line and in self_fenced; with every lease live, neither appears.
func TestStatusSelfFenced(t *testing.T) {
	st := &slotdv1.StatusResponse{Version: 7, Server: "s1"}
	tests := []struct {
		name      string
		infos     []*slotdv1.NodeInfo
		want      []string
		wantTable string
	}{
		{"every lease live", []*slotdv1.NodeInfo{info("n1", 0, true), info("n2", 0, true)}, nil, ""},
		{"two cut off", []*slotdv1.NodeInfo{info("n3", 0, false), info("n1", 0, true), info("n2", 0, false)}, []string{"n2", "n3"},
			"no lease, serving none of their slots (self-fenced: cut off from slotd, stopped, or not registered): n2, n3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, g := capture("json")
			if err := g.printStatus(st, tc.infos, load.View{}, nil, nil); err != nil {
				t.Fatal(err)
			}
			var got statusJSON
			if err := json.Unmarshal(out.Bytes(), &got); err != nil || strings.Join(got.SelfFenced, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("json self_fenced %v, want %v (%v)", got.SelfFenced, tc.want, err)
			}
			out, g = capture("table")
			if err := g.printStatus(st, tc.infos, load.View{}, nil, nil); err != nil {
				t.Fatal(err)
			}
			if has := strings.Contains(out.String(), "self-fenced"); has != (tc.wantTable != "") || !strings.Contains(out.String(), tc.wantTable) {
				t.Fatalf("table:\n%s\nwant line %q", out, tc.wantTable)
			}
		})
	}
}
