package ringcompat

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slotd/slotd/slots"
)

// goldenReplicas are the node sets whose initial replica sets are pinned:
// id:weight[:zone],..., vnodes and rf.
var goldenReplicas = []struct{ nodes, vnodes, rf string }{
	{"a:1:z1,b:1:z2,c:1:z3", "128", "3"},
	{"a1:1:za,a2:1:za,a3:1:za,b1:1:zb,b2:1:zb,b3:1:zb,c1:1:zc,c2:1:zc,c3:1:zc", "128", "3"},
	{"a1:1:za,a2:1:za,a3:1:za,b1:1:zb,b2:1:zb,b3:1:zb,c1:1:zc", "128", "3"},
	{"node-a:2:z1,node-b:1:z1,node-c:1:z2,node-d:4:z3", "16", "2"},
	{"a:1,b:1,c:1,d:1", "64", "2"},
}

// replicasLine renders one pinned set of replica sets: nodes, vnodes, rf,
// replicas and primaries per node in the input order, the sets of slots
// 0-3, and the SHA-256 of every set (ids joined by ",") joined by "\n".
func replicasLine(t *testing.T, nodes, vnodes, rf string) string {
	t.Helper()
	v, err := strconv.Atoi(vnodes)
	if err != nil {
		t.Fatal(err)
	}
	k, err := strconv.Atoi(rf)
	if err != nil {
		t.Fatal(err)
	}
	ns := parseNodes(t, nodes)
	sets, err := InitialReplicas(ns, v, k)
	if err != nil {
		t.Fatal(err)
	}
	replicas, primaries := map[string]int{}, map[string]int{}
	joined := make([]string, len(sets))
	for s, set := range sets {
		primaries[set[0]]++
		for _, id := range set {
			replicas[id]++
		}
		joined[s] = strings.Join(set, ",")
	}
	var rs, ps []string
	for _, n := range ns {
		rs = append(rs, fmt.Sprintf("%s=%d", n.ID, replicas[n.ID]))
		ps = append(ps, fmt.Sprintf("%s=%d", n.ID, primaries[n.ID]))
	}
	sum := sha256.Sum256([]byte(strings.Join(joined, "\n")))
	return strings.Join([]string{"P", nodes, vnodes, rf, strings.Join(rs, ","), strings.Join(ps, ","),
		strings.Join(joined[:4], " "), hex.EncodeToString(sum[:])}, "\t")
}

const replicasHeader = `# Pinned initial replica sets (ringcompat.InitialReplicas). Bootstrap at rf > 1 must give the
# same sets anywhere, so a change here is a compatibility break.
# Regenerate only on purpose: go test ./ringcompat -run TestInitialReplicasGolden -rewrite
# P<TAB>id:weight[:zone],...<TAB>vnodes<TAB>rf<TAB>id=replicas,...<TAB>id=primaries,...<TAB>sets of slots 0-3 (ids by ",", primary first; sets by " ")<TAB>sha256hex(every set joined by ",", sets joined by "\n")
`

func TestInitialReplicasGolden(t *testing.T) {
	checkPinned(t, filepath.Join("testdata", "initial_replicas.tsv"), "P", 8, len(goldenReplicas),
		func() string {
			var b strings.Builder
			b.WriteString(replicasHeader)
			for _, g := range goldenReplicas {
				b.WriteString(replicasLine(t, g.nodes, g.vnodes, g.rf) + "\n")
			}
			return b.String()
		},
		func(fields []string) string { return replicasLine(t, fields[1], fields[2], fields[3]) })
}

// TestInitialReplicasProperties: on random clusters, every slot gets rf
// distinct nodes in rf distinct zones, the primaries are
// InitialAssignment's, rf 1 is InitialAssignment, a lower rf is a prefix
// of a higher one's primaries, the order of nodes does not matter, and with
// zones of equal weight no node holds more than its cap.
func TestInitialReplicasProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 12 {
		nzones := 1 + rng.IntN(4)
		perZone := 1 + rng.IntN(3)
		var nodes []Node
		zoneOf := map[string]string{}
		for z := range nzones {
			for i := range perZone {
				id := fmt.Sprintf("z%d-n%d", z, i)
				nodes = append(nodes, Node{ID: id, Weight: 1 + rng.IntN(2), Zone: fmt.Sprintf("zone%d", z)})
				zoneOf[id] = fmt.Sprintf("zone%d", z)
			}
		}
		vnodes := 16 << rng.IntN(3)
		owners, err := InitialAssignment(nodes, vnodes)
		if err != nil {
			t.Fatal(err)
		}
		for rf := 1; rf <= nzones; rf++ {
			sets, err := InitialReplicas(nodes, vnodes, rf)
			if err != nil {
				t.Fatalf("trial %d rf %d: %v", trial, rf, err)
			}
			counts := map[string]int{}
			for s, set := range sets {
				if len(set) != rf || set[0] != owners[s] {
					t.Fatalf("trial %d rf %d slot %d: set %v, want %d nodes with primary %s", trial, rf, s, set, rf, owners[s])
				}
				zones := map[string]bool{}
				for _, id := range set {
					if zones[zoneOf[id]] {
						t.Fatalf("trial %d rf %d slot %d: two replicas in %s: %v", trial, rf, s, zoneOf[id], set)
					}
					zones[zoneOf[id]] = true
					counts[id]++
				}
			}
			if rf == nzones && perZone == 1 {
				for id, c := range counts {
					if c != slots.Count {
						t.Fatalf("trial %d: %s alone in its zone holds %d replicas, want every slot", trial, id, c)
					}
				}
			}
			shuffled := slices.Clone(nodes)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			again, err := InitialReplicas(shuffled, vnodes, rf)
			if err != nil || !slices.EqualFunc(sets, again, slices.Equal[[]string]) {
				t.Fatalf("trial %d rf %d: the order of nodes changed the sets (%v)", trial, rf, err)
			}
		}
	}
}

// TestInitialReplicasCaps: three zones of three equal nodes at rf 3: every
// node holds a third of its zone's 16,384 replicas, within its cap.
func TestInitialReplicasCaps(t *testing.T) {
	var nodes []Node
	for _, z := range []string{"a", "b", "c"} {
		for i := range 3 {
			nodes = append(nodes, Node{ID: z + strconv.Itoa(i), Weight: 1, Zone: z})
		}
	}
	sets, err := InitialReplicas(nodes, 128, 3)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, set := range sets {
		for _, id := range set {
			counts[id]++
		}
	}
	limit := (3*slots.Count + 8) / 9 // ceil(rf * slots / nodes)
	for id, c := range counts {
		if c > limit || c < limit-300 {
			t.Errorf("%s holds %d replicas, want at most its cap %d and near it", id, c, limit)
		}
	}
}

func TestInitialReplicasBadInput(t *testing.T) {
	zoned := []Node{{ID: "a", Weight: 1, Zone: "z1"}, {ID: "b", Weight: 1, Zone: "z1"}, {ID: "c", Weight: 1, Zone: "z2"}}
	tests := []struct {
		name  string
		nodes []Node
		rf    int
		want  error
	}{
		{"rf 0", zoned, 0, ErrBadReplicas},
		{"rf above the maximum", zoned, MaxReplicas + 1, ErrBadReplicas},
		{"rf above the zones", zoned, 3, ErrBadReplicas},
		{"no nodes", nil, 1, ErrNoNodes},
		{"a duplicate node", []Node{{ID: "a", Weight: 1}, {ID: "a", Weight: 1}}, 1, ErrDuplicateNode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := InitialReplicas(tc.nodes, 16, tc.rf); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
