// Command slotctl is the operator's CLI for slotd: inspect the slot map, add
// and drain nodes, plan, apply, throttle, pause and roll back rebalances.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
