// Package redirect formats and parses the answers a store node gives for a
// slot it will not serve: MOVED and ASK redirects, and FENCED (retry later).
// It is the Go side of the contract documented in api/slotdv1/redirect.proto.
//
// Store node side (gRPC):
//
//	if owner != self {
//		return nil, redirect.Redirect{Kind: redirect.Moved, Slot: s,
//			Owner: owner.ID, Addr: owner.Addr, Version: m.Version()}.Err()
//	}
//
// Store node side (text protocol): write r.String(), e.g.
// "MOVED 4546 10.0.0.7:7500 42".
//
// Client side:
//
//	if r, ok := redirect.FromError(err); ok { ... }
//	r, err := redirect.Parse(line) // from a text protocol
package redirect
