package grpcapi

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/slots"
)

// FuzzPlanFile feeds arbitrary bytes through what `slotctl apply plan.json`
// and Admin.SubmitPlan do with a plan file: protojson into slotd.v1.Plan,
// PlanFromProto, mover.ValidatePlan. Nothing may panic; a plan that
// validates must really hold slots in range, each once, from one node to
// another, and survive the trip back to a plan file unchanged. Seeds in
// testdata/fuzz/FuzzPlanFile (a real plan file, and the ways one goes bad).
func FuzzPlanFile(f *testing.F) {
	f.Add([]byte(`{"id":"p1","base_version":"7","moves":[{"slot":1,"from":"n1","to":"n2","bytes":"100","reason":"fill n2"}]}`))
	f.Add([]byte(`{"id":"p2","moves":[{"slot":16384,"from":"n1","to":"n2"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var pb slotdv1.Plan
		if err := protojson.Unmarshal(data, &pb); err != nil {
			return
		}
		p := PlanFromProto(&pb)
		if err := mover.ValidatePlan(p); err != nil {
			if !errors.Is(err, mover.ErrInvalid) {
				t.Fatalf("ValidatePlan error is not mover.ErrInvalid: %v", err)
			}
			return
		}
		if p.ID == "" {
			t.Fatal("a plan without an id validated")
		}
		seen := map[int]bool{}
		for i, m := range p.Moves {
			if m.Slot < 0 || m.Slot >= slots.Count || seen[m.Slot] || m.From == "" || m.To == "" || m.From == m.To || m.Bytes < 0 {
				t.Fatalf("plan validated with bad move %d: %+v", i, m)
			}
			seen[m.Slot] = true
		}
		if p.TotalBytes < 0 {
			t.Fatalf("total bytes %d", p.TotalBytes)
		}

		// slotctl plan -o json writes planProto's protojson; reading it back
		// must give the same plan.
		out, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(planProto(p, true, nil))
		if err != nil {
			t.Fatalf("marshal a valid plan: %v", err)
		}
		var pb2 slotdv1.Plan
		if err := protojson.Unmarshal(out, &pb2); err != nil {
			t.Fatalf("plan file %s does not parse back: %v", out, err)
		}
		q := PlanFromProto(&pb2)
		if err := mover.ValidatePlan(q); err != nil {
			t.Fatalf("plan no longer valid after a round trip: %v", err)
		}
		if q.ID != p.ID || q.BaseVersion != p.BaseVersion || q.Reason != p.Reason || q.Estimate != p.Estimate || q.TotalBytes != p.TotalBytes {
			t.Fatalf("round trip changed the plan: %+v -> %+v", p, q)
		}
		if len(q.Moves) != len(p.Moves) {
			t.Fatalf("round trip: %d moves -> %d", len(p.Moves), len(q.Moves))
		}
		for i := range p.Moves {
			a, b := p.Moves[i], q.Moves[i]
			if a.Slot != b.Slot || a.From != b.From || a.To != b.To || a.Bytes != b.Bytes || a.Reason != b.Reason {
				t.Fatalf("round trip changed move %d: %+v -> %+v", i, a, b)
			}
		}
		if !slices.Equal(p.Edits.Drain, q.Edits.Drain) || !slices.Equal(p.Edits.Add, q.Edits.Add) || !maps.Equal(p.Edits.Weights, q.Edits.Weights) {
			t.Fatalf("round trip changed the edits: %+v -> %+v", p.Edits, q.Edits)
		}
	})
}
