// Package ringcompat is a vnode consistent-hash ring: the engine that
// produces slotd's initial slot assignment, and a drop-in for teams that
// still route keys with rings.
//
// It reproduces the reference ring bit for bit (the Seed000 point hash,
// pinned by testdata/ring_seed000.tsv) and the md5 ring of the published
// ring simulation (the MD5 point hash with Config.StrictSuccessor, pinned by
// its table), and adds named
// nodes with weights and zones, zone-aware replica sets, bounded-load
// lookups, and, beside the ring, rendezvous hashing and jump hashing.
//
// Rings are immutable: Add and Remove return a new ring, and a Holder swaps
// rings atomically, so lookups never lock and never allocate.
//
// Usage:
//
//	r, err := ringcompat.New(ringcompat.Config{}, // xxhash, 128 points per unit of weight
//		ringcompat.Node{ID: "cache-1", Weight: 1, Zone: "a"},
//		ringcompat.Node{ID: "cache-2", Weight: 2, Zone: "b"},
//	)
//	h := ringcompat.NewHolder(r)
//	owner, ok := h.Load().LookupString("user:1042")
//	replicas := h.Load().ReplicasString("user:1042", 2) // owner first, then another zone
//
//	// A membership change builds a new ring and swaps it in.
//	_, err = h.Update(func(r *ringcompat.Ring) (*ringcompat.Ring, error) {
//		return r.Add(ringcompat.Node{ID: "cache-3", Weight: 1, Zone: "a"})
//	})
//
// The initial owners of the 16,384 slots (index = slot number), by the rule
// documented on InitialAssignment:
//
//	owners, err := ringcompat.InitialAssignment(nodes, ringcompat.DefaultVNodes)
package ringcompat
