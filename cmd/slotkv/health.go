package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// readiness is whether the node can serve keys: it holds a slot map from
// slotd in which slots have owners (a standalone node always does). Until
// then every request would answer UNAVAILABLE, so gRPC health says
// NOT_SERVING and /readyz 503: a load balancer or an orchestrator waits.
type readiness struct {
	maps mapSource
	hs   *health.Server
}

func newReadiness(maps mapSource) *readiness {
	r := &readiness{maps: maps, hs: health.NewServer()}
	r.hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	return r
}

// run follows the map until ctx ends, then leaves health NOT_SERVING for
// the shutdown. The map source has no change notification; a check every
// 100 ms is a load read and costs nothing.
func (r *readiness) run(ctx context.Context) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	serving := false
	for {
		if ok := r.maps.Assigned(); ok != serving {
			serving = ok
			st := healthpb.HealthCheckResponse_NOT_SERVING
			if ok {
				st = healthpb.HealthCheckResponse_SERVING
			}
			r.hs.SetServingStatus("", st)
		}
		select {
		case <-ctx.Done():
			r.hs.Shutdown()
			return nil
		case <-t.C:
		}
	}
}

// readyz is GET /readyz: 200 once the node holds an assigned map.
func (r *readiness) readyz(w http.ResponseWriter, _ *http.Request) {
	if !r.maps.Assigned() {
		http.Error(w, "not ready: no slot map with assigned slots from slotd yet (is the cluster initialized? slotctl init)", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}
