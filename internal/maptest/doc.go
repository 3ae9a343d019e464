// Package maptest runs an in-memory Directory service on a real 127.0.0.1
// socket, for testing the client SDK and store nodes without slotd or etcd.
//
// A State is the directory (what etcd holds); any number of Servers serve
// one State, the way several slotd replicas serve one etcd, so tests can
// kill one and watch clients fail over.
//
// Usage:
//
//	st := maptest.NewState(m)           // m is a *slotmap.Map
//	srv, err := maptest.Start(st, "127.0.0.1:0")
//	defer srv.Stop()
//	st.Set(next)                        // watchers get a delta
package maptest
