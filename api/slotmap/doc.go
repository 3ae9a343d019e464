// Package slotmap holds the slot map in memory: which node owns each of the
// 16,384 slots at one directory version, the node table, and the moves in
// flight. A *Map is immutable and safe for concurrent use; updates return a
// new Map, so readers can swap maps through an atomic.Pointer and route
// without locks.
//
// A map may also hold each slot's replica set (docs/replication.md): its
// epoch, its in-sync replicas (the owner, which is the primary, first) and
// its learners. Only the sets other than an owner alone at epoch 0 are
// kept, so at rf 1 there are none and the map, its wire form and its deltas
// are what they were before replica sets. Route reads the owner table alone;
// Replicas orders a slot's in-sync replicas nearest zone first for reads
// that may use one.
//
// It also converts maps to and from their compact wire form
// (slotdv1.SlotMap: a node table plus bit-packed owner indexes; a full map of
// 200 nodes is about 18 KiB) and computes and applies deltas
// (slotdv1.MapDelta).
//
// A Feed is the server side of the watch: it computes each delta and each
// full encoding once, keeps recent deltas for watchers that reconnect, and
// serves any number of WatchMap streams.
//
// Usage (server side):
//
//	m, err := slotmap.New(slotmap.Snapshot{Version: v, Nodes: nodes, Owners: owners})
//	feed := slotmap.NewFeed(m, 0)
//	err = feed.Publish(next)                   // on every directory change
//	return feed.Watch(stream.Context(), req.GetKnownVersion(), stream.Send) // WatchMap
//
// Usage (client side):
//
//	m, err := slotmap.FromProto(wire)
//	m, err = m.Apply(delta)
//	r := m.Route([]byte("{user:42}:cart")) // r.Slot, r.Owner, r.Addr, r.Version
//	rs := m.Replicas(r.Slot, "zone-a")        // in-sync replicas, zone-a's first
package slotmap
