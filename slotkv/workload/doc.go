// Package workload drives slotkv stores through the client SDK (package
// slotkv/kvclient) with one engine (engine.go): several clients, each one
// request at a time, under one rate limit. Two kinds of mix run on it.
//
// Workload drives a bounded mix of Get, Put and CompareAndSet on a small
// key set from several concurrent clients, and records every operation with its invocation and
// response times and its result: a history that package e2e/linz checks for
// linearizability and that the e2e tests check for lost writes.
//
// A failed write is recorded with Unknown set: the store may or may not have
// applied it, so a checker must allow both. A failed read is recorded too
// (it counts as a client error) but has no effect on any check.
//
// Usage:
//
//	w, err := workload.New(workload.Config{KV: kv, Clients: 4, Keys: 32, Prefix: "wl"})
//	if err != nil { ... }
//	ctx, stop := context.WithCancel(ctx)
//	done := make(chan error, 1)
//	go func() { done <- w.Run(ctx) }()
//	... faults ...
//	stop()
//	<-done
//	h := w.History() // then h.Final(ctx, kv) reads every key back
//
// Load, Check and Traffic are the mixes of the `slotkv load`, `check` and
// `traffic` commands: they keep counts, not a history, so they can run for
// as long as a demo does; Traffic verifies every read and, when stopped,
// every acknowledged write.
//
//	r, err := workload.Load(ctx, workload.BulkConfig{KV: kv, Prefix: "key", Keys: 1000, Size: 100, Concurrency: 16, OpTimeout: 10 * time.Second})
package workload
