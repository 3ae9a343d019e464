package mover

import (
	"errors"
	"strings"
	"testing"

	"github.com/slotd/slotd/slots"
)

// TestSubmitChecksPlanFile: a plan file that cannot be a plan of this
// cluster (malformed, a base ahead of the directory, a node the cluster
// never had, a source that did not own its slot at the plan's base) is
// ErrPlanFile and stores nothing; a good one is stored proposed.
func TestSubmitChecksPlanFile(t *testing.T) {
	c := newCluster(t, 3)
	snap, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner := snap.Owner(slots.MustNew(7))
	other := "n1"
	if owner == other {
		other = "n2"
	}
	plan := func(id string, edit func(*Plan)) *Plan {
		p := &Plan{ID: id, BaseVersion: snap.Version, Moves: []PlannedMove{{Slot: 7, From: owner, To: other}}}
		edit(p)
		return p
	}
	for _, tc := range []struct {
		name string
		p    *Plan
		msg  string // "": accepted
	}{
		{"to itself", plan("p-self", func(p *Plan) { p.Moves[0].To = owner }), "to itself"},
		{"base ahead", plan("p-ahead", func(p *Plan) { p.BaseVersion += 5 }), "is ahead of the directory"},
		{"unknown node", plan("p-unknown", func(p *Plan) { p.Moves[0].To = "n9" }), `node "n9" was never part of this cluster`},
		{"wrong source", plan("p-from", func(p *Plan) { p.Moves[0].From = other; p.Moves[0].To = "n3" }), "was owned by " + owner},
		{"added node", plan("p-add", func(p *Plan) {
			p.Edits.Add = []NodeSpec{{ID: "n9", Addr: "127.0.0.1:1"}}
			p.Moves[0].To = "n9"
		}), ""},
		{"good", plan("p-good", func(*Plan) {}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.ctl.Submit(c.ctx, tc.p, "t")
			if tc.msg == "" {
				if err != nil || got.State != StateProposed {
					t.Fatalf("submit: %+v, %v; want it proposed", got, err)
				}
				return
			}
			if !errors.Is(err, ErrPlanFile) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("submit: %v, want %v mentioning %q", err, ErrPlanFile, tc.msg)
			}
			if _, err := c.ctl.Get(c.ctx, tc.p.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("refused plan file %s stored (get: %v)", tc.p.ID, err)
			}
		})
	}
}
