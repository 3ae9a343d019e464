// Package slotdv1 holds the slotd gRPC API, version 1: the .proto files and
// the Go code generated from them by `make proto` (never edit *.pb.go).
//
// Services:
//   - Directory (directory.proto): read the slot map, watch it, look up a key,
//     list nodes. Used by the client SDK and store nodes.
//   - Admin (admin.proto): bootstrap, node registration and liveness, drain,
//     weights, and the mover's plan / apply / pause / resume / cancel /
//     rollback / move / throttle / status / history calls. Used by slotctl.
//   - Store (store.proto): the migration protocol every store node serves to
//     the mover: export, change capture, import, fence, stats, drop, checksum.
//
// The redirect contract (MOVED / ASK as a gRPC status detail, and the text
// form "MOVED <slot> <address> <version>") is in redirect.proto; the Go
// helpers for it are in package api/redirect. The compact map encoding is
// described on SlotMap in map.proto and implemented by package api/slotmap.
//
// Usage:
//
//	conn, err := grpc.NewClient("127.0.0.1:7400",
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
//	if err != nil { ... }
//	defer conn.Close()
//	dir := slotdv1.NewDirectoryClient(conn)
//	resp, err := dir.Lookup(ctx, &slotdv1.LookupRequest{
//		Target: &slotdv1.LookupRequest_Key{Key: []byte("{user:42}:cart")}})
package slotdv1
