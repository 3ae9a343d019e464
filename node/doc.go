// Package node is the library a store node embeds to join a slotd cluster.
//
// A store implements the small Store interface (scan a slot from a cursor,
// apply a batch, delete a slot's data, report sizes) and routes every write
// through Node.Write and every read through Node.CheckRead. The library then
// does the rest:
//
//   - ownership: a request for a slot the node does not own gets a MOVED
//     redirect with the owner's address and the map version; a write to a
//     slot fenced for a move gets a retryable error (gRPC UNAVAILABLE with
//     a retry hint, see StatusError);
//   - change capture: while a slot is exported, its writes are appended to an
//     ordered, persisted change log, so the mover can catch the target up;
//   - the slotd.v1.Store migration protocol (RegisterStore): throttled
//     export with a resumable cursor, a change stream, idempotent import,
//     persisted fences, per-slot stats, background throttled drop, checksum;
//   - registration with slotd and its heartbeat (Registrar);
//   - load: per slot, reads served and writes applied as ~1 and ~10-minute
//     decaying averages (one atomic add per request, folded by Run), keys
//     and bytes (a store that sizes every slot in one pass implements
//     SlotSizer), and a 64-key sketch of the hottest keys; Node.Load reads
//     them and a Reporter sends them to every slotd replica.
//
// Which slots the node owns comes from a MapSource: the client SDK's map
// cache, or a StaticMap in tests and single-node setups.
//
// The library's own state (fences, change logs, import progress) lives in
// Config.StateDir; keep it with the store's data, so that a restart keeps
// every fence.
//
// Usage, for a store whose data lives in db:
//
//	type kvStore struct{ db *DB } // implements node.Store
//
//	n, err := node.New(node.Config{
//		ID: "kv-1", Store: kvStore{db}, Map: sdkMap, StateDir: "/var/lib/kv/node",
//	})
//	if err != nil { ... }
//	defer n.Close()
//	go n.Run(ctx)
//	grpcServer := grpc.NewServer(node.ServerOptions()...) // imports read in place
//	n.RegisterStore(grpcServer)                            // the mover's protocol
//
//	// In the store's own Put handler:
//	err = n.Write(ctx, key, func() ([]node.Mutation, error) {
//		return []node.Mutation{{Key: key, Value: value}}, nil
//	})
//	return node.StatusError(err) // MOVED / FENCED / ... as gRPC statuses
//
//	// In its Get handler:
//	if err := n.CheckRead(key); err != nil {
//		return node.StatusError(err)
//	}
package node
