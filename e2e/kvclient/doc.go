// Package kvclient calls slotkv's KV API (Get, Put, CompareAndSet) through
// slotd's client SDK: every request is routed to its slot's owner with the
// SDK's local map and follows MOVED, ASK and FENCED answers. It counts the
// redirects it followed, which the demo and the e2e tests report.
//
// It lives under e2e/ because the e2e workload and the `slotkv` client
// commands share it; it holds nothing test-only.
//
// Usage:
//
//	sdk, err := client.New(ctx, client.Options{Endpoints: []string{"127.0.0.1:7400"}})
//	if err != nil { ... }
//	kv := kvclient.New(sdk)
//	defer kv.Close() // closes the KV connections, not sdk
//	ver, err := kv.Put(ctx, []byte("k"), []byte("v"))
//	val, ver, found, err := kv.Get(ctx, []byte("k"))
//
// A Client is safe for concurrent use.
package kvclient
