// Package devca makes a throwaway certificate authority and the certificates
// slotd, slotkv, etcd and their clients need for development, the demo
// (DEMO_TLS=1) and tests. It uses only the standard library's crypto
// (ECDSA P-256), so `make certs` needs no openssl.
//
// Nothing it writes is fit for production: the CA key sits next to the
// certificates and every leaf is valid for a year.
//
// Generate writes a fixed set of files into one directory; the names never
// change, so scripts and docs can refer to them:
//
//	ca.pem, ca-key.pem          the development CA (trust ca.pem everywhere)
//	server.pem, server-key.pem  slotd, slotkv and etcd listeners: localhost,
//	                            127.0.0.1 and ::1; usable as a client
//	                            certificate too (etcd peers, slotd -> etcd)
//	admin.pem, admin-key.pem    client with role admin
//	read.pem, read-key.pem      client with role read
//	store.pem, store-key.pem    client with roles store and read (store nodes
//	                            registering with slotd; slotd calling stores)
//	tokens.txt                  bearer tokens for the three roles, in the
//	                            format auth.Config.TokenFile reads
//	admin.token, read.token,
//	store.token                 one token each, for client token files
//
// Roles are carried as URI SANs spiffe://<trust domain>/role/<role> (the rule
// package auth reads; default trust domain "slotd").
//
// Usage from a test:
//
//	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
//	if err != nil { t.Fatal(err) }
//	srvTLS := tlsconf.Config{CertFile: set.ServerCert, KeyFile: set.ServerKey, CAFile: set.CA}
//
// And for a single certificate:
//
//	ca, _ := devca.NewCA("test CA")
//	kp, _ := ca.Issue(devca.Leaf{CommonName: "x", IPAddresses: []net.IP{net.IPv6loopback}, Server: true})
//	_ = kp.WriteFiles(certPath, keyPath)
package devca
