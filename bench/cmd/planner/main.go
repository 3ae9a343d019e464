// Command planner measures mover/planner on 1,000 nodes x 16,384 slots
// (bench/RESULTS.md item 7): the time to compute a plan and its number of moves
// against the theoretical minimum, computed here independently of the
// planner. It prints a Markdown section for bench/RESULTS.md.
//
//	cd bench && go run ./cmd/planner -rounds 3 -benchtime 250ms
package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/ringcompat"
	"github.com/slotd/slotd/slots"
)

const nodes = 1000

type scenario struct {
	name  string
	add   int // nodes added
	drain int // nodes drained (the last ones)
}

func main() {
	testing.Init()
	rounds := flag.Int("rounds", 3, "timed rounds per scenario; the median is kept")
	benchtime := flag.String("benchtime", "250ms", "time per scenario per round")
	flag.Parse()
	if err := flag.Set("test.benchtime", *benchtime); err != nil {
		fail(err)
	}
	command := strings.TrimSpace("cd bench && go run ./cmd/planner " + strings.Join(os.Args[1:], " "))

	base := make([]ringcompat.Node, nodes)
	for i := range base {
		base[i] = ringcompat.Node{ID: "node-" + strconv.Itoa(i), Weight: 1}
	}
	boot, err := ringcompat.InitialAssignment(base, ringcompat.DefaultVNodes)
	if err != nil {
		fail(err)
	}
	// The bootstrap table caps nodes only from above (8 to 17 slots each at
	// 1,000 nodes); the scenarios start from the table its first plan
	// balances, as a running cluster's would be.
	first, err := planner.Compute(input(boot, scenario{}))
	if err != nil {
		fail(err)
	}
	owners := slices.Clone(boot)
	for _, m := range first.Moves {
		owners[m.Slot] = m.To
	}

	fmt.Printf("### 7. Planner: %s nodes x %s slots\n\n", "1,000", "16,384")
	fmt.Printf("Start: the bootstrap table of 1,000 equal nodes (`ringcompat.InitialAssignment`, 128 vnodes), which caps nodes "+
		"only from above (8 to 17 slots each); the first row balances it, the others start from that balanced table "+
		"(16 or 17 slots each). Time: median of %d rounds of `testing.Benchmark` over `planner.Compute` (%s each). The theoretical minimum is computed "+
		"here, not by the planner: every active node must end with floor or ceil of 16,384 / active nodes slots (the larger "+
		"share going to the nodes holding most), drained nodes with none, and a move relieves one slot of excess. "+
		"Ratio = our moves / minimum.\n\n", *rounds, *benchtime)
	fmt.Println("| case | ours (time, moves) | minimum (moves) | ratio | command |")
	fmt.Println("|---|---|---|---|---|")
	for _, sc := range []scenario{
		{"balance the bootstrap table", 0, 0},
		{"add 1 node", 1, 0},
		{"add 10 nodes", 10, 0},
		{"add 100 nodes", 100, 0},
		{"drain 10 nodes", 0, 10},
	} {
		table := owners
		if sc.name == "balance the bootstrap table" {
			table = boot
		}
		in := input(table, sc)
		p, err := planner.Compute(in)
		if err != nil {
			fail(err)
		}
		if err := check(p, in); err != nil {
			fail(fmt.Errorf("%s: %w", sc.name, err))
		}
		var ns []float64
		for range *rounds {
			br := testing.Benchmark(func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := planner.Compute(in); err != nil {
						b.Fatal(err)
					}
				}
			})
			ns = append(ns, float64(br.T.Nanoseconds())/float64(br.N))
		}
		lo := minimum(in)
		fmt.Printf("| planner, 1,000 nodes: %s | %.2f ms, %d moves | %d moves | %.2f | `%s` |\n",
			sc.name, median(ns)/1e6, len(p.Moves), lo, float64(len(p.Moves))/float64(lo), command)
		fmt.Fprintf(os.Stderr, "planner: %s done\n", sc.name)
	}
}

func input(owners []string, sc scenario) planner.Input {
	in := planner.Input{Version: 1, Owners: owners}
	for i := range nodes + sc.add {
		st := planner.StateActive
		if i < nodes && i >= nodes-sc.drain {
			st = planner.StateDraining
		}
		in.Nodes = append(in.Nodes, planner.Node{ID: "node-" + strconv.Itoa(i), Weight: 1, State: st})
	}
	return in
}

// minimum is the fewest single-slot moves that reach a balanced table, for
// equal weights: drained nodes give everything; among active nodes, the
// ones holding most take the ceil shares, which leaves the least excess.
func minimum(in planner.Input) int {
	held := map[string]int{}
	for _, o := range in.Owners {
		held[o]++
	}
	var active []int
	moves := 0
	for _, n := range in.Nodes {
		if n.State == planner.StateActive {
			active = append(active, held[n.ID])
		} else {
			moves += held[n.ID]
		}
	}
	slices.SortFunc(active, func(a, b int) int { return cmp.Compare(b, a) })
	share, extra := slots.Count/len(active), slots.Count%len(active)
	for i, h := range active {
		t := share
		if i < extra {
			t++
		}
		moves += max(0, h-t)
	}
	return moves
}

// check applies the plan and verifies the result is balanced, so that the
// move count is compared on a plan that does its job.
func check(p *planner.Plan, in planner.Input) error {
	after := slices.Clone(in.Owners)
	for _, m := range p.Moves {
		if after[m.Slot] != m.From {
			return fmt.Errorf("move of slot %d from %s, owned by %s", m.Slot, m.From, after[m.Slot])
		}
		after[m.Slot] = m.To
	}
	held := map[string]int{}
	for _, o := range after {
		held[o]++
	}
	active := 0
	for _, n := range in.Nodes {
		if n.State == planner.StateActive {
			active++
		}
	}
	lo, hi := slots.Count/active, (slots.Count+active-1)/active
	for _, n := range in.Nodes {
		h := held[n.ID]
		if n.State != planner.StateActive && h != 0 {
			return fmt.Errorf("%s is draining but keeps %d slots", n.ID, h)
		}
		if n.State == planner.StateActive && (h < lo || h > hi) {
			return fmt.Errorf("%s ends with %d slots, want %d-%d", n.ID, h, lo, hi)
		}
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "planner:", err)
	os.Exit(1)
}
