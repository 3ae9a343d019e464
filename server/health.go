package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/grpcapi"
)

// ready reports why slotd cannot serve, or nil: etcd must answer within
// two seconds and hold a directory schema this binary supports.
func ready(ctx context.Context, dir *directory.Directory) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	schema, err := dir.Schema(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("etcd: %w", err)
	case schema == 0 || schema > directory.SchemaVersion:
		return fmt.Errorf("directory schema %d, this slotd supports 1-%d", schema, directory.SchemaVersion)
	}
	return nil
}

// followReadiness keeps the gRPC health status in step with ready, so a
// load balancer checking health stops sending to a replica cut off from
// etcd. It returns when ctx ends.
func followReadiness(ctx context.Context, hs *health.Server, dir *directory.Directory, lg *slog.Logger) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	serving := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := ready(ctx, dir)
		if ctx.Err() != nil {
			return
		}
		if (err == nil) != serving {
			serving = err == nil
			st := healthpb.HealthCheckResponse_SERVING
			if !serving {
				st = healthpb.HealthCheckResponse_NOT_SERVING
				lg.Warn("not ready; health says NOT_SERVING", "err", err)
			} else {
				lg.Info("ready again; health says SERVING")
			}
			hs.SetServingStatus("", st)
		}
	}
}

// httpMux serves /metrics, /healthz (the process runs), /readyz (etcd
// answers and holds a schema this binary supports) and, everywhere else,
// ui: the web console (/ redirects to /ui/).
func httpMux(reg *prometheus.Registry, dir *directory.Directory, hub *grpcapi.Hub, ui http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", ui)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context(), dir); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		v := uint64(0)
		if m := hub.Current(); m != nil {
			v = m.Version()
		}
		fmt.Fprintf(w, "ready: map version %d\n", v)
	})
	return mux
}
