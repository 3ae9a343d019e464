package planner

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slotd/slotd/slots"
)

// TestReplicaScenarios runs the replica planner over testdata/replicas/*.txt
// and compares its summary with the expected output below each file's
// "----" line; -rewrite regenerates the expected output after a deliberate
// change. Every plan is also applied step by step (applySteps), so a
// scenario fails on a broken rule whatever its expected text says.
func TestReplicaScenarios(t *testing.T) {
	runScenarios(t, filepath.Join("testdata", "replicas", "*.txt"), func(t *testing.T, input string) string {
		in, show := parseReplicaScenario(t, input)
		p, err := ComputeReplicas(in)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		if _, err := applySteps(in, p); err != nil {
			t.Fatal(err)
		}
		return summarizeReplicas(p, show)
	})
}

// runScenarios runs each file matching glob: the text above its "----" line
// is the input, below it the output run gives for it; -rewrite writes what
// run gives instead of comparing.
func runScenarios(t *testing.T, glob string, run func(t *testing.T, input string) string) {
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			input, expected, _ := strings.Cut(string(raw), "----\n")
			got := run(t, input)
			if *rewrite {
				if err := os.WriteFile(f, []byte(input+"----\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != expected {
				t.Fatalf("output differs (run with -rewrite if intended)\n--- got\n%s--- want\n%s", got, expected)
			}
		})
	}
}

// parseReplicaScenario reads lines:
//
//	policy rf=N min_isr=M
//	node ID [weight=W] [zone=Z] [state=S] [new]
//	bootstrap rf=N          the vnode ring's initial sets over the nodes not marked new
//	set RANGES A,B,C [learners=D,E]   the primary first
//	bytes RANGES=N
//	ops RANGES=N            requests per second, reported by each slot's primary
//	busy RANGES
//	show RANGES             print every step of these slots
func parseReplicaScenario(t *testing.T, text string) (ReplicaInput, slots.Set) {
	t.Helper()
	in := ReplicaInput{RF: 1, MinISR: 1}
	var show slots.Set
	var fresh []string
	ops := map[int]float64{}
	for line := range strings.SplitSeq(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		kv := map[string]string{}
		for _, x := range f[1:] {
			k, v, _ := strings.Cut(x, "=")
			kv[k] = v
		}
		atoi := func(k string) int {
			n, err := strconv.Atoi(kv[k])
			if err != nil {
				t.Fatalf("%q: %s: %v", line, k, err)
			}
			return n
		}
		switch f[0] {
		case "policy":
			in.RF, in.MinISR = atoi("rf"), atoi("min_isr")
		case "node":
			n := Node{ID: f[1], Weight: 1, Zone: kv["zone"], State: StateActive}
			if _, ok := kv["weight"]; ok {
				n.Weight = atoi("weight")
			}
			if s, ok := kv["state"]; ok {
				n.State = s
			}
			if _, ok := kv["new"]; ok {
				fresh = append(fresh, n.ID)
			}
			in.Nodes = append(in.Nodes, n)
		case "bootstrap":
			old := slices.DeleteFunc(slices.Clone(in.Nodes), func(n Node) bool { return slices.Contains(fresh, n.ID) })
			sets, err := bootstrapSets(old, atoi("rf"))
			if err != nil {
				t.Fatal(err)
			}
			in.Sets = sets
		case "set":
			set := ReplicaSet{ISR: strings.Split(f[2], ",")}
			if l, ok := kv["learners"]; ok {
				set.Learners = strings.Split(l, ",")
			}
			set1 := mustSet(t, f[1])
			for s := range set1.All() {
				in.Sets[s.Int()] = set
			}
		case "bytes", "ops":
			r, v, _ := strings.Cut(f[1], "=")
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if in.SlotBytes == nil && f[0] == "bytes" {
				in.SlotBytes = make([]int64, slots.Count)
			}
			rs := mustSet(t, r)
			for s := range rs.All() {
				if f[0] == "bytes" {
					in.SlotBytes[s.Int()] = x
				} else {
					ops[s.Int()] = float64(x)
				}
			}
		case "busy":
			set := mustSet(t, f[1])
			in.Busy = &set
		case "show":
			show = mustSet(t, f[1])
		default:
			t.Fatalf("unknown scenario line %q", line)
		}
	}
	if len(ops) > 0 {
		in.Loads = map[string]NodeLoad{}
		for _, n := range in.Nodes {
			in.Loads[n.ID] = NodeLoad{}
		}
		for _, s := range slices.Sorted(maps.Keys(ops)) {
			p := in.Sets[s].Primary()
			l := in.Loads[p]
			l.Slots = append(l.Slots, SlotLoad{Slot: uint16(s), Reads: ops[s]})
			in.Loads[p] = l
		}
	}
	return in, show
}

// summarizeReplicas prints what an operator checks: the step counts, the
// first steps and those of the shown slots, then zones, nodes,
// under-replicated and blocked slots and hot spots.
func summarizeReplicas(p *ReplicaPlan, show slots.Set) string {
	var b strings.Builder
	kinds := map[StepKind]int{}
	for _, st := range p.Steps {
		kinds[st.Kind]++
	}
	fmt.Fprintf(&b, "steps %d: add-learner %d, join-isr %d, transfer-primary %d, remove-replica %d; copies %d bytes\n",
		len(p.Steps), kinds[StepAddLearner], kinds[StepJoinISR], kinds[StepTransferPrimary], kinds[StepRemoveReplica], p.TotalBytes)
	for k, st := range p.Steps {
		if k < 8 || show.Contains(slots.MustNew(st.Slot)) {
			fmt.Fprintf(&b, "%d %s: %s\n", k, st, st.Reason)
		}
	}
	for _, z := range p.Zones {
		fmt.Fprintf(&b, "zone %s active=%d replicas %d -> %d target %d\n", z.Zone, z.Active, z.ReplicasBefore, z.ReplicasAfter, z.TargetReplicas)
	}
	for _, n := range p.Nodes {
		fmt.Fprintf(&b, "node %s %s %s w=%d replicas %d -> %d target %d primaries %d -> %d target %d",
			n.ID, n.Zone, n.State, n.Weight, n.ReplicasBefore, n.ReplicasAfter, n.TargetReplicas, n.PrimariesBefore, n.PrimariesAfter, n.TargetPrimaries)
		if n.LoadBefore != (Load{}) || n.LoadAfter != (Load{}) {
			fmt.Fprintf(&b, " bytes %.0f -> %.0f ops %.0f -> %.0f", n.LoadBefore.Bytes, n.LoadAfter.Bytes, n.LoadBefore.Ops, n.LoadAfter.Ops)
		}
		b.WriteString("\n")
	}
	for _, u := range p.UnderReplicated {
		fmt.Fprintf(&b, "under-replicated %d slots at %d of %d replicas: %s\n", u.Count, u.Replicas, p.RF, u.Reason)
	}
	for _, x := range p.Blocked {
		fmt.Fprintf(&b, "blocked %s %d slots: %s\n", x.Node, x.Count, x.Reason)
	}
	for _, h := range p.HotSpots {
		fmt.Fprintf(&b, "hot slot %d on %s: %s %.2fx its share\n", h.Slot, h.Node, h.Dimension, h.Share)
	}
	if p.Note != "" {
		fmt.Fprintf(&b, "note: %s\n", p.Note)
	}
	return b.String()
}
