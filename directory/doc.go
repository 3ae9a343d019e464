// Package directory is the versioned slot table of a slotd cluster, kept in
// etcd: the owner of each of the 16,384 slots, the nodes, the moves in
// flight, and a bounded history of every change. It is the only code that
// knows the etcd key layout (keys.go); everything else uses this API.
//
// Every change to the table (owners, nodes, moves) is one etcd transaction
// that compares the cluster version key's revision and bumps the version, so
// two writers can never both succeed on the same expectation, and every
// reader gets the whole table at exactly one version. The records kept beside
// the table change no owner and bump no version: the mover's throttle
// (throttle.go) and plan records (planstore.go) are plain writes, the
// balancer's policy and state (autopolicy.go) compare their own revision, and
// liveness keys (liveness.go) live on leases.
//
// Each slot has a replica set (replicas.go): its owner is the primary, with
// an in-sync set and learners, changed one step per transaction
// (replicasteps.go) under the replication policy (replication.go), which is
// part of the versioned table. Every writer checks the zone rule and
// min_isr in the transaction that would break them. docs/replication.md
// has the design.
//
// Usage:
//
//	d, err := directory.New(directory.Config{Client: cli, Logger: lg})
//	if err != nil { ... }
//	// once, for a new cluster (after migrations.Apply):
//	snap, err := d.Bootstrap(ctx, []directory.Node{
//		{ID: "a", Addr: "10.0.0.1:7000", Weight: 1},
//		{ID: "b", Addr: "10.0.0.2:7000", Weight: 1},
//	}, 0, "operator")
//	owner := snap.Owner(slots.ForString("user:42"))
//
//	// move one slot: begin, the mover copies and fences, then commit
//	mv, err := d.BeginMove(ctx, directory.MoveSpec{Slot: s, From: "a", To: "b", Reason: "rebalance"})
//	_, err = d.AdvanceMove(ctx, s, mv.MoveID, directory.PhaseFenced)
//	v, err := d.CommitMove(ctx, s, mv.MoveID, "mover")
//
//	// follow the table
//	err = d.Watch(ctx, 0, func(s *directory.Snapshot) error { ...; return nil })
//
// Errors are the package's sentinels (ErrConflict, ErrInvalid, ...) wrapped
// with context; test them with errors.Is. A Directory is safe for
// concurrent use.
package directory
