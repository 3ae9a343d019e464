package planner

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

func benchLoadInput(mode BalanceBy, drain bool) Input {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("node-%04d", i)
	}
	owning := ids[:900]
	nodes := active(ids...)
	if drain {
		owning = ids
		for i := 0; i < 100; i++ {
			nodes[i*10].State = StateDraining
		}
	}
	owners := evenOwners(owning...)
	w := Workload{Keys: 200000, S: 1.1, Ops: 100000, MinValue: 100, MaxValue: 4096, Seed: 1, Tag: "hot", TagShare: 0.001, TagKeys: 10}
	return Input{Owners: owners, Nodes: nodes, Loads: w.Loads(owners), BalanceBy: mode}
}

// BenchmarkComputeLoad1000Nodes: 1,000 nodes, per-slot loads on every slot
// (Zipf 1.1 over 200,000 keys): 100 new nodes to fill, or 100 to drain.
func BenchmarkComputeLoad1000Nodes(b *testing.B) {
	for _, drain := range []bool{false, true} {
		for _, mode := range []BalanceBy{BalanceAuto, BalanceBytes, BalanceOps} {
			name := "add100/" + string(mode)
			if drain {
				name = "drain100/" + string(mode)
			}
			b.Run(name, func(b *testing.B) {
				in := benchLoadInput(mode, drain)
				b.ReportAllocs()
				var p *Plan
				cpu0 := cpuTime()
				for b.Loop() {
					var err error
					if p, err = Compute(in); err != nil {
						b.Fatal(err)
					}
				}
				// CPU time beside wall time: the machine is shared.
				b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64(len(p.Moves)), "moves")
			})
		}
	}
}

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
