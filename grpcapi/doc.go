// Package grpcapi is slotd's gRPC API: the Directory server (the map for
// clients and store nodes: GetMap, WatchMap, Lookup, ListNodes) and the
// Admin server (nodes, plans, throttle, status, history) over the
// directory and the mover's control API.
//
// Reads come from a Hub, which follows the directory with ONE etcd watch
// per process, encodes each new map version once (the full map and the
// delta from the version before) and fans it out to every WatchMap stream.
// The hub never waits for a stream: a slow watcher catches up from the kept
// deltas, or gets the full map when it fell further behind, while the
// others go on.
//
// Errors of directory and mover become gRPC codes in one place (toStatus):
// InvalidArgument, NotFound, AlreadyExists (second bootstrap),
// FailedPrecondition (state forbids it, stale plan, not bootstrapped),
// Aborted (lost a compare-and-swap: re-read and retry), Unavailable (etcd).
//
// Usage:
//
//	hub, err := grpcapi.NewHub(grpcapi.HubConfig{Directory: d, ClusterID: id, Registerer: reg})
//	agg, err := load.New(load.Config{Map: hub}) // the stores' load reports, checked against hub's map
//	svc, err := grpcapi.New(grpcapi.Config{Directory: d, Hub: hub, Load: agg, Control: ctl, Logger: lg, Registerer: reg})
//	if err != nil { ... }
//	srv := grpc.NewServer(append(grpcapi.ServerOptions(), authOpts...)...)
//	svc.Register(srv)
//	go svc.Run(ctx)   // the hub: one directory watch; streams end when it returns
//	go srv.Serve(lis)
package grpcapi
