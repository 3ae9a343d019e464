package clusterstatus

import (
	"bytes"
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/slotd/slotd/api/slotdv1"
)

// Plan is a plan in a status, nil when none applies. In JSON it is the
// plan's one form (PlanJSON), null when nil.
type Plan struct{ *slotdv1.Plan }

// MarshalJSON implements json.Marshaler.
func (p Plan) MarshalJSON() ([]byte, error) { return PlanJSON(p.Plan) }

// UnmarshalJSON implements json.Unmarshaler: a plan's form, or null.
func (p *Plan) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		p.Plan = nil
		return nil
	}
	p.Plan = &slotdv1.Plan{}
	return protojson.Unmarshal(b, p.Plan)
}

// PlanJSON renders a plan in its one JSON form, everywhere a plan is
// printed: the protojson of slotdv1.Plan with the .proto field names and
// every field present, which `slotctl apply plan.json` (Admin.SubmitPlan)
// reads back; null for nil. protojson varies its whitespace on purpose;
// compacting makes the output stable.
func PlanJSON(p *slotdv1.Plan) (json.RawMessage, error) {
	if p == nil {
		return json.RawMessage("null"), nil
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(p)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
