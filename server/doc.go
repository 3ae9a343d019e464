// Package server is slotd as an embeddable package, the way etcd's embed
// package is etcd: cmd/slotd maps its flags to a Config and runs a Server,
// and tests start the same server in-process (server/servertest) instead of
// wiring slotd's parts by hand.
//
// A Server serves the slot directory's gRPC API (Directory for clients and
// store nodes, Admin for slotctl) on Config.Listen, runs the mover (one
// leader per cluster, elected through etcd) and serves /metrics, /healthz and
// /readyz on Config.HTTP. It starts an embedded single-member etcd in
// Config.DataDir unless Config.EtcdEndpoints names an existing cluster, and
// applies pending directory schema migrations in New.
//
// A Server touches nothing process-wide: signals (SIGHUP reloads the TLS
// files: see TLS) and GOGC are left to its caller.
//
// Usage:
//
//	cfg := server.DefaultConfig()
//	cfg.DataDir = dir
//	if err := cfg.Validate(); err != nil { ... } // New validates too
//	s, err := server.New(ctx, cfg)
//	if err != nil { ... }
//	defer s.Close()
//	log.Println("gRPC on", s.GRPCAddr())
//	err = s.Run(ctx) // until ctx ends, then an orderly shutdown
package server
