// Package client is the SDK that applications embed to reach a store
// sharded by slotd. It keeps the slot map in memory, fresh through the
// Directory watch stream (reconnecting with capped, jittered backoff and
// failing over across slotd endpoints), routes keys to their owners locally,
// and runs requests against owners while following MOVED and ASK redirects.
//
// Route costs one hash and one table read: no RPC, no lock, no allocation.
// The map is swapped atomically on every update. An update costs a watcher
// little: a delta that moves slots or changes the moves in flight is
// decoded into reused messages (client/internal/watchwire), and the new map
// shares the old one's owner table, copying a 448-byte Map (and 256 bytes
// of recently moved slots' owners when a slot moved).
//
// Usage:
//
//	c, err := client.New(ctx, client.Options{
//		Endpoints:  []string{"10.0.0.1:7400", "10.0.0.2:7400"},
//		Registerer: prometheus.DefaultRegisterer,
//	})
//	if err != nil { ... }
//	defer c.Close()
//
//	r, err := c.RouteString("{user:42}:cart") // r.Slot, r.Owner(), r.Addr(), r.Version
//
//	err = c.Do(ctx, []byte("{user:42}:cart"), func(ctx context.Context, addr string, asking bool) error {
//		if asking {
//			ctx = redirect.WithAsking(ctx)
//		}
//		_, err := kvClientFor(addr).Put(ctx, req) // a MOVED/ASK status is handled by Do
//		return err
//	})
//
// With replica sets (rf > 1), Replicas lists a slot's in-sync replicas for
// reads that may use one, those in Options.Zone first; writes still go to
// Route's owner, the primary, and a write sent elsewhere is answered MOVED.
//
// Store nodes (node) follow the map with Subscribe.
//
// A Client is safe for concurrent use.
package client
