package slotkv

import "github.com/slotd/slotd/auth"

// Policy says who may call what on a slotkv node when authorization is on
// (a client CA or a token file):
//
//   - the migration protocol (slotd.v1.Store: export, import, fence, drop,
//     checksum) needs role store: only slotd's mover, dialing with a store
//     certificate, may copy or drop a slot's data or stop its writes;
//   - the KV data API needs role read (admin implies it; devca's store
//     certificate carries it too): every application that routes with the
//     SDK already holds read to watch the map, so any identity the cluster
//     issued may read and write data. slotkv is a reference store and has
//     no per-key authorization; a real store would add its own;
//   - reflection (grpcurl, grpc_cli) needs role read, as on slotd;
//   - gRPC health is public.
func Policy() *auth.Policy {
	return auth.NewPolicy().
		Require("/slotd.v1.Store/*", auth.RoleStore).
		Require("/slotkv.v1.KV/*", auth.RoleRead).
		Require("/grpc.reflection.v1.ServerReflection/*", auth.RoleRead).
		Require("/grpc.reflection.v1alpha.ServerReflection/*", auth.RoleRead).
		Public("/grpc.health.v1.Health/*")
}
