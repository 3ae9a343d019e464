// Command slotkv is slotd's reference store node: a durable key-value store
// (gRPC Get / Put / Delete / CompareAndSet) that embeds the node library, so
// slotd can move its slots. Every flag is also an environment variable
// (--data-dir is SLOTKV_DATA_DIR).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}
