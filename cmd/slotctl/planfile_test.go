package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestPlanFileChecks: a plan file that cannot be a plan of this cluster
// (base ahead of the directory, a node it never had, a source that did not
// own the slot at the plan's own base) is "invalid plan file", exit 1; a
// plan overtaken by later changes stays "stale", exit 3. On the old code
// the base ahead applied, and a tampered from was "stale" with exit 3.
func TestPlanFileChecks(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	dir := t.TempDir()
	var plan map[string]any
	if err := json.Unmarshal([]byte(s.ok(t, "plan", "--drain", "n1", "--max-moves", "4", "-o", "json")), &plan); err != nil {
		t.Fatal(err)
	}
	// Each variant gets its own id: a plan id names one plan.
	write := func(name string, edit func(p map[string]any, moves []any)) string {
		t.Helper()
		var p map[string]any
		b, _ := json.Marshal(plan)
		_ = json.Unmarshal(b, &p)
		p["id"] = "p-file-" + name
		edit(p, p["moves"].([]any))
		b, _ = json.Marshal(p)
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	base, _ := strconv.Atoi(plan["base_version"].(string))
	ahead := write("ahead", func(p map[string]any, _ []any) { p["base_version"] = strconv.Itoa(base + 5) })
	from := write("from", func(_ map[string]any, m []any) { m[0].(map[string]any)["from"] = "n2" })
	unknown := write("unknown", func(_ map[string]any, m []any) { m[1].(map[string]any)["to"] = "n9" })
	good := write("good", func(map[string]any, []any) {})

	oneLineErr(t, s.run(t, "", "apply", ahead), exitFailure, "invalid plan file: plan p-file-ahead: base_version "+strconv.Itoa(base+5)+" is ahead of the directory")
	oneLineErr(t, s.run(t, "", "apply", from), exitFailure, "invalid plan file: plan p-file-from move 0: slot")
	oneLineErr(t, s.run(t, "", "apply", from), exitFailure, "not n2")
	oneLineErr(t, s.run(t, "", "apply", unknown), exitFailure, `invalid plan file: plan p-file-unknown move 1`)
	oneLineErr(t, s.run(t, "", "apply", unknown), exitFailure, `node "n9" was never part of this cluster`)
	var st statusJSON
	decode(t, s.ok(t, "status", "-o", "json"), &st)
	if st.ActivePlan.Plan != nil || st.Version != uint64(base) {
		t.Fatalf("invalid plan files changed the cluster: version %d (was %d), active plan %s", st.Version, base, st.ActivePlan.GetId())
	}
	// Overtaken: the plan moves slots to nodes now draining. Stale, exit 3.
	s.ok(t, "nodes", "drain", "n2")
	s.ok(t, "nodes", "drain", "n3")
	oneLineErr(t, s.run(t, "", "apply", good), exitRefused, "stale")
}
