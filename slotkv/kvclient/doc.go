// Package kvclient calls slotkv's KV API (Get, Put, Delete, CompareAndSet) through
// slotd's client SDK: every request is routed to its slot's owner with the
// SDK's local map and follows MOVED, ASK and FENCED answers. It counts the
// redirects it followed, which the demo and the e2e tests report.
//
// A failed call returns an *Error naming the key, its slot, the owner the
// map named and the store tried, wrapping the cause (the SDK's
// client.ErrTooManyRedirects, a gRPC status...) for errors.Is and
// errors.As.
//
// Usage:
//
//	sdk, err := client.New(ctx, client.Options{Endpoints: []string{"127.0.0.1:7400"}})
//	if err != nil { ... }
//	kv := kvclient.New(sdk)
//	defer kv.Close() // closes the KV connections, not sdk
//	ver, err := kv.Put(ctx, []byte("k"), []byte("v"))
//	val, ver, found, err := kv.Get(ctx, []byte("k"))
//	var kerr *kvclient.Error
//	if errors.As(err, &kerr) { log.Printf("slot %d on %s", kerr.Slot, kerr.Owner) }
//
// A Client is safe for concurrent use.
package kvclient
