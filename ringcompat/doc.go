// Package ringcompat is a vnode consistent-hash ring: the engine that
// produces slotd's initial slot assignment, and a drop-in for teams that
// still route keys with rings.
//
// It reproduces the ring of seed 000 bit for bit (the Seed000 point hash) and
// seed 001's md5 ring (the MD5 point hash with StrictSuccessor), and adds
// named nodes with weights and zones, zone-aware replica sets, bounded-load
// lookups, rendezvous hashing and jump hashing.
//
// Rings are immutable: Add and Remove return a new ring, and a Holder swaps
// rings atomically so that lookups never lock.
//
// Usage:
//
//	r, err := ringcompat.New(ringcompat.Config{}, // xxhash, 128 vnodes per unit of weight
//		ringcompat.Node{ID: "cache-1", Weight: 1, Zone: "a"},
//		ringcompat.Node{ID: "cache-2", Weight: 2, Zone: "b"},
//	)
//	owner, ok := r.LookupString("user:1042")
//	replicas := r.Replicas([]byte("user:1042"), 2)
//
//	var h ringcompat.Holder
//	h.Store(r)
//	r2, err := h.Load().Add(ringcompat.Node{ID: "cache-3", Weight: 1})
//
// The initial owners of the 16,384 slots:
//
//	owners, err := ringcompat.InitialAssignment(nodes, ringcompat.DefaultVNodes)
package ringcompat
