package ringcompat

import (
	"slices"
	"testing"
)

// TestReplicas: distinct nodes, as many as asked or as there are, zones
// spread first, and every shorter list a prefix of a longer one.
func TestReplicas(t *testing.T) {
	zoned := []Node{
		{ID: "a1", Weight: 1, Zone: "a"}, {ID: "a2", Weight: 2, Zone: "a"}, {ID: "a3", Weight: 1, Zone: "a"},
		{ID: "b1", Weight: 1, Zone: "b"}, {ID: "b2", Weight: 1, Zone: "b"},
		{ID: "c1", Weight: 3, Zone: "c"},
		{ID: "solo", Weight: 1}, // empty zone: a zone of its own
	}
	cases := []struct {
		name  string
		nodes []Node
		zones int
	}{
		{"no zones", numbered(6, 1), 6},
		{"zones", zoned, 4},
		{"one zone", []Node{{ID: "x", Weight: 1, Zone: "z"}, {ID: "y", Weight: 1, Zone: "z"}, {ID: "w", Weight: 2, Zone: "z"}}, 1},
		{"one node", []Node{{ID: "only", Weight: 1}}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := mustNew(t, Config{VNodes: 32}, tc.nodes...)
			zoneOf := map[string]string{}
			for _, n := range tc.nodes {
				zoneOf[n.ID] = n.Zone
				if n.Zone == "" {
					zoneOf[n.ID] = "own:" + n.ID
				}
			}
			for _, key := range testKeys(500) {
				full := r.ReplicasString(key, len(tc.nodes)+2)
				if len(full) != len(tc.nodes) {
					t.Fatalf("Replicas(%s, n+2) has %d nodes, want %d", key, len(full), len(tc.nodes))
				}
				if owner, _ := r.LookupString(key); full[0] != owner {
					t.Fatalf("first replica %s is not the owner %s", full[0], owner)
				}
				seen := map[string]bool{}
				for i, id := range full {
					if seen[id] {
						t.Fatalf("Replicas(%s) repeats %s: %v", key, id, full)
					}
					seen[id] = true
					if i < tc.zones {
						for _, prev := range full[:i] {
							if zoneOf[prev] == zoneOf[id] {
								t.Fatalf("Replicas(%s) = %v: %s shares a zone before every zone is used", key, full, id)
							}
						}
					}
				}
				for k := 0; k <= len(tc.nodes)+1; k++ {
					got := r.Replicas([]byte(key), k)
					if want := full[:min(k, len(full))]; !slices.Equal(got, want) {
						t.Fatalf("Replicas(%s, %d) = %v, not a prefix of %v", key, k, got, full)
					}
				}
			}
		})
	}
}
