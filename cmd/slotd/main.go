// Command slotd is the slotd control plane: the directory's gRPC API, the
// mover (one active per cluster, elected through etcd) and Prometheus
// metrics, over an embedded etcd by default or an existing etcd cluster.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
