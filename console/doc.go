// Package console is slotd's read-only web console: a page at /ui/ on
// slotd's HTTP port (assets embedded with go:embed; nothing is fetched
// from elsewhere, and a Content-Security-Policy allows only what the page
// uses) and the JSON it polls, documented in docs/console.md:
//
//	GET /api/v1/status   nodes, the applying plan with rate and ETA, moves in
//	                     flight, recent history, hot slots and keys
//	GET /api/v1/map      the owner of each of the 16,384 slots, moves in flight
//	GET /api/v1/load     per-slot keys, bytes and ops (null where unmeasured)
//	GET /api/v1/replicas per-slot in-sync replicas and learners, the slots
//	                     that are not ok (under-replicated and the like)
//
// Every JSON answer carries an ETag and answers 304 to If-None-Match, so
// an open page that polls an idle cluster costs a comparison. With
// authorization on (client certificates or tokens) the JSON needs the read
// role, decided by the same auth.Authorizer and policy as gRPC (the
// methods Admin/Status, Admin/ListReplicaSets and Directory/GetMap); the
// page itself is public.
//
// Usage (server/ mounts it on slotd's HTTP mux, with a Source and a
// LoadSource that read its own process):
//
//	h, err := console.New(console.Config{Source: src, Load: loads, Authorizer: az})
//	mux.Handle("/", h)
package console
