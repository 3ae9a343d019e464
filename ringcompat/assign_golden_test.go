package ringcompat

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/slotd/slotd/internal/vectors"
)

var rewrite = flag.Bool("rewrite", false, "regenerate testdata/initial_assignment.tsv from the current code")

// goldenAssignments are the node sets whose initial assignment is pinned.
// Each is written as id:weight[:zone],... and a vnodes count.
var goldenAssignments = []struct{ nodes, vnodes string }{
	{"a:1,b:1,c:1", "128"},
	{"big:3,mid:2,small:1", "64"},
	{"n0:1,n1:1,n2:1,n3:1,n4:1,n5:1,n6:1,n7:1,n8:1,n9:1", "128"},
	{"node-a:2:z1,node-b:1:z1,node-c:1:z2,node-d:4:z3", "16"},
	{"solo:1", "1"},
}

func parseNodes(t *testing.T, spec string) []Node {
	t.Helper()
	var nodes []Node
	for _, item := range strings.Split(spec, ",") {
		parts := strings.Split(item, ":")
		w, err := strconv.Atoi(parts[1])
		if err != nil || len(parts) > 3 {
			t.Fatalf("bad node %q", item)
		}
		n := Node{ID: parts[0], Weight: w}
		if len(parts) == 3 {
			n.Zone = parts[2]
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// assignmentLine renders one pinned assignment: nodes, vnodes, slots per
// node in the input order, the owners of slots 0-7, and the SHA-256 of all
// owners joined by newlines, so another implementation can check itself.
func assignmentLine(t *testing.T, nodes, vnodes string) string {
	t.Helper()
	v, err := strconv.Atoi(vnodes)
	if err != nil {
		t.Fatal(err)
	}
	ns := parseNodes(t, nodes)
	owners, err := InitialAssignment(ns, v)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, o := range owners {
		counts[o]++
	}
	var cs []string
	for _, n := range ns {
		cs = append(cs, fmt.Sprintf("%s=%d", n.ID, counts[n.ID]))
	}
	sum := sha256.Sum256([]byte(strings.Join(owners, "\n")))
	return strings.Join([]string{"D", nodes, vnodes, strings.Join(cs, ","), strings.Join(owners[:8], ","), hex.EncodeToString(sum[:])}, "\t")
}

const goldenHeader = `# Pinned initial assignments (ringcompat.InitialAssignment). Bootstrap must give
# the same table anywhere, so a change here is a compatibility break.
# Regenerate only on purpose: go test ./ringcompat -run TestInitialAssignmentGolden -rewrite
# D<TAB>id:weight[:zone],...<TAB>vnodes<TAB>id=slots,...<TAB>owners of slots 0-7<TAB>sha256hex(owners of slots 0-16383 joined by "\n")
`

func TestInitialAssignmentGolden(t *testing.T) {
	checkPinned(t, filepath.Join("testdata", "initial_assignment.tsv"), "D", 6, len(goldenAssignments),
		func() string {
			var b strings.Builder
			b.WriteString(goldenHeader)
			for _, g := range goldenAssignments {
				b.WriteString(assignmentLine(t, g.nodes, g.vnodes) + "\n")
			}
			return b.String()
		},
		func(fields []string) string { return assignmentLine(t, fields[1], fields[2]) })
}

// checkPinned checks a file of pinned lines: every line but comments has
// nfields tab-separated fields, the first being tag, and render gives it
// again from its fields; there are want of them. With -rewrite it writes
// the file from write first.
func checkPinned(t *testing.T, path, tag string, nfields, want int, write func() string, render func(fields []string) string) {
	t.Helper()
	if *rewrite {
		if err := os.WriteFile(path, []byte(write()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := vectors.Read(t, path, func(_ string, fields []string) {
		line := strings.Join(fields, "\t")
		if len(fields) != nfields || fields[0] != tag {
			t.Fatalf("bad line %q", line)
		}
		if got := render(fields); got != line {
			t.Errorf("%s changed:\n got  %s\n want %s", path, got, line)
		}
	})
	if n != want {
		t.Errorf("%d pinned lines in %s, want %d (run with -rewrite after changing the list)", n, path, want)
	}
}
