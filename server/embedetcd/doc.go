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
//
// With TLS (https:// URLs; a CA makes the member require client
// certificates from it, since etcd has no optional mode):
//
//	files := tlsconf.Config{CertFile: "certs/server.pem", KeyFile: "certs/server-key.pem", CAFile: "certs/ca.pem"}
//	srv, err := embedetcd.Start(ctx, embedetcd.Config{DataDir: dir,
//		ClientURL: "https://127.0.0.1:7479", PeerURL: "https://127.0.0.1:7480",
//		ClientTLS: files, PeerTLS: files})
//	tc, err := tlsconf.NewClient(tlsconf.Config{CertFile: "certs/server.pem", KeyFile: "certs/server-key.pem", CAFile: "certs/ca.pem"})
//	cc := clientv3.Config{Endpoints: srv.Endpoints()}
//	tc.ConfigureEtcd(&cc)
//	cli, err := clientv3.New(cc)
package embedetcd
