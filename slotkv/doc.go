// Package slotkv is slotd's reference store node: a durable key-value store
// with versioned values, built on one bbolt file, that embeds the node
// library (node) and so takes part in slot moves.
//
// Storage: every key is stored as its 2-byte big-endian slot followed by the
// key, so a slot is one contiguous range and exporting or dropping it is one
// cursor walk. A value is stored as an 8-byte big-endian version followed by
// the user's bytes; the version travels with the value when a slot is
// copied, so source and target hold the same bytes and compare-and-set keeps
// working across a move.
//
// Durability: by default every commit is fsynced before the write is
// acknowledged (and so is the change log of a slot being exported). With
// Config.NoSync (slotkv --fsync=false) commits are not fsynced: a crash of
// the process loses nothing, a crash of the machine can lose the last
// writes. Fences are always fsynced. With fsync, commits of concurrent
// writes to different slots share one fsync (bbolt's Batch, 1 ms collection
// window). The cost, from BenchmarkPut (8 gRPC clients, 100-byte values, on
// a busy 2-core machine): fsync on 1.6k-2.9k puts/s with p99 5-25 ms, fsync
// off 6k-13k puts/s with p99 2.6-7 ms.
//
// Authorization: Policy says which role each gRPC method needs when the
// server runs package auth's interceptors (cmd/slotkv with --tls-ca or
// --token-file): the Store migration protocol needs store, the KV API read.
//
// Usage:
//
//	m := new(node.StaticMap)
//	m.SetAll("kv-1", "127.0.0.1:7500")
//	srv, err := slotkv.Open(slotkv.Config{ID: "kv-1", DataDir: dir, Map: m})
//	if err != nil { ... }
//	defer srv.Close()
//	g := grpc.NewServer(srv.ServerOptions()...)
//	srv.Register(g) // KV + slotd.v1.Store
//	go srv.Run(ctx)
//	go g.Serve(lis)
package slotkv
