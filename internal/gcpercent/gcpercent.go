// Package gcpercent sets the garbage collector's target for slotd's
// long-running processes when the operator has not.
//
// Their live heaps are small (slotkv's data is in bbolt's mmap, not the
// heap) while a slot copy allocates fast: every batch is decoded and
// encoded again on each hop. At Go's default GOGC=100 the collector then
// runs every few MB and took 15-25% of a move's CPU; at 400 an in-process
// move of 20,000 x 1 KiB used 189-195 ms of CPU instead of 227-229 and one
// of 100,000 x 100 B 296-328 instead of 393-441, at the cost of a heap up
// to five times the live one (GOGC=100 and GOGC=400, SLOTD_BENCH_SYNC=1
// go test -bench MoveThroughput ./mover, cpu-ms/op).
package gcpercent

import (
	"os"
	"runtime/debug"
	"strconv"
)

// Default is the GOGC slotd and slotkv run with unless GOGC is set.
const Default = 400

// Apply sets the collector's target to Default when the environment has no
// GOGC (a GOGC set there, including "off", wins), and reports what is in
// force.
func Apply() string {
	if v, ok := os.LookupEnv("GOGC"); ok {
		return v
	}
	debug.SetGCPercent(Default)
	return strconv.Itoa(Default)
}
