// Package embedetcd runs an etcd member inside the slotd process: the
// default, so that one command starts a working control plane, and the
// building block of `slotd etcd`, which runs one member of a multi-member
// cluster for the end-to-end tests.
//
// Usage:
//
//	srv, err := embedetcd.Start(ctx, embedetcd.Config{DataDir: "/var/lib/slotd/etcd"})
//	if err != nil { ... }
//	defer srv.Close()
//	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints()})
package embedetcd
